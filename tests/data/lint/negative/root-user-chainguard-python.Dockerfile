# negative: root-user
# Chainguard's language images run as nonroot (65532): left alone without --resolve-base
FROM cgr.dev/chainguard/python:3.12.7@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "-m", "http.server", "8080"]
