ARG BASE=python:3.11.9-slim-bookworm
# ARG-in-FROM: the default is substituted before judging.
# expect: base-unpinned
FROM ${BASE}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
