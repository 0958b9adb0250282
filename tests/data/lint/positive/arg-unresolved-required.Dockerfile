ARG BASE
# ${BASE?...} makes BuildKit stop the build when BASE has no value
# expect: arg-unresolved
FROM ${BASE?set-BASE-to-a-pinned-image}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
