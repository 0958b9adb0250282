# ADD of a git repository at a branch, a tag (in the URL's query too) or its default branch:
# each can move, so the build is not reproducible. A full commit id or --checksum fixes it.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: remote-add
ADD --keep-git-dir=true git@github.com:example/repo.git#main /src/a
# expect: remote-add
ADD https://github.com/example/repo.git?tag=v1.2.0 /src/b
# expect: remote-add
ADD ssh://git@github.com/example/repo.git /src/c
# expect: remote-add
ADD https://github.com/example/repo.git#0123456 /src/d
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
