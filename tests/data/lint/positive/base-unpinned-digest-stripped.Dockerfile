# syntax=docker/dockerfile:1
ARG IMAGE=python:3.11.9-slim-bookworm@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
# ${IMAGE%%@*} removes the digest (BuildKit's longest-suffix operator): the base is unpinned.
# expect: base-unpinned
FROM ${IMAGE%%@*}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
