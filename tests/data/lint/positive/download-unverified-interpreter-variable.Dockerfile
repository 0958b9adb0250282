# Installers piped into an interpreter held in a variable, with environment settings before
# it (Poetry's installer in serving images with several Pythons, get-pip.py for the Python
# found at build time).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
ARG PYTHON=python3.11
ENV POETRY_HOME=/opt/poetry
# expect: download-unverified
RUN curl -sSL https://install.python-poetry.org | POETRY_VERSION=1.8.3 POETRY_HOME=${POETRY_HOME} ${PYTHON} -
# expect: download-unverified
RUN PY="$(command -v python3)" \
    && curl -fsSL https://bootstrap.pypa.io/get-pip.py | PIP_ROOT_USER_ACTION=ignore $PY -

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=build /opt/poetry /opt/poetry
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
