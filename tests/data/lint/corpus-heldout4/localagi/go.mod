module github.com/mudler/LocalAGI

go 1.26

require (
	github.com/gofiber/fiber/v2 v2.52.9
	github.com/sashabaranov/go-openai v1.41.1
)
