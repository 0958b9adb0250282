# A truncated digest is not a pin.
# expect: base-unpinned
FROM python:3.11.9-slim@sha256:adcc27ecb800
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
