# Images read by COPY --from and RUN --mount=from= count like a FROM (the uv binary copied
# from its image is the common case).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: base-unpinned
COPY --from=ghcr.io/astral-sh/uv:0.5.1 /uv /uvx /bin/
# expect: base-unpinned
RUN --mount=from=ghcr.io/astral-sh/uv:0.5.1,source=/uv,target=/bin/uv \
    uv pip install --system fastapi==0.111.0
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
