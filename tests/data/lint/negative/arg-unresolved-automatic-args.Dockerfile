# negative: arg-unresolved
# check=error=true
# escape=\
FROM --platform=$BUILDPLATFORM python:3.11.9-slim-bookworm@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2 AS build
RUN echo building for $TARGETPLATFORM
FROM python:3.11.9-slim-bookworm${TARGETOSVERSION}${TARGETSTAGE%default}${BUILDOSVERSION}@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2 AS unused
FROM python:3.11.9-slim-bookworm${BUILDKIT_SBOM_SCAN_STAGE:-}@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
