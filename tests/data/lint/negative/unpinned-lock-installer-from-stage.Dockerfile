FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS builder
# negative: unpinned-packages
# The project folder comes from another stage, which servelab does not see into: it may
# hold the lock, so the poetry install is not judged.
WORKDIR /app
COPY pyproject.toml poetry.lock ./

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
COPY --from=builder /app /app
RUN poetry install --no-root
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
