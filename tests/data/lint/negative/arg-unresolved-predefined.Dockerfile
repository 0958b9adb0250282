# negative: arg-unresolved
# BuildKit sets TARGETARCH and BUILDPLATFORM itself.
FROM --platform=$BUILDPLATFORM 127.0.0.1:5000/servelab/python-base:bookworm-${TARGETARCH}@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
