FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS builder
# negative: unpinned-packages
# The project folder comes from another stage to a destination named by an ENV (the
# project's folder once substituted), and to one still holding an unknown variable: either
# may hold the lock, so uv sync is not judged.
WORKDIR /build
COPY pyproject.toml uv.lock ./

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV APP_HOME=/srv/app
WORKDIR $APP_HOME
COPY --from=builder /build $APP_HOME
RUN uv sync --no-dev
COPY --from=builder /build ${SOMEWHERE}
RUN cd /opt/other && uv sync --no-dev
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
