# negative: arg-unresolved, base-unpinned
ARG BASE=python:3.11.9-slim-bookworm@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
# declared again without a value before the first FROM: BuildKit keeps the value it has
ARG BASE
FROM ${BASE}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
