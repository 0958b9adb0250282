module github.com/example/localai-fork

go 1.22
