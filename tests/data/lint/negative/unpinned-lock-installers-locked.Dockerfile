FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# negative: unpinned-packages
# Each installer has its lock: copied by name (a glob too), bind-mounted, or demanded by
# --frozen/--locked/--deploy (which fail without it), or UV_FROZEN set.
COPY pyproject.toml uv.lock ./
RUN uv sync --no-dev
COPY pyproject.toml poetry.lock* ./
RUN poetry install --no-root
COPY Pipfile Pipfile.lock /srv/
RUN pipenv install --system
RUN --mount=type=bind,source=pdm.lock,target=/pdm.lock pdm install --prod
RUN uv sync --locked && uv sync --frozen && pipenv install --deploy --system
ENV UV_FROZEN=1
RUN uv sync
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
