# ARG BASE= (an empty default): FROM resolves to a blank name, which BuildKit refuses;
# said as arg-unresolved, not as a base with "no tag" or "not pinned".
ARG BASE=
# expect: arg-unresolved
FROM ${BASE}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
