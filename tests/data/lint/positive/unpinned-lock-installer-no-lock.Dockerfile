FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# Lock-based installers run with only the project file copied: each resolves the newest
# versions (pipenv --system without --deploy, poetry, pdm, uv without --frozen/--locked).
# uv's binary copied from its image lands elsewhere and brings no lock.
COPY --from=ghcr.io/astral-sh/uv:0.5.11@sha256:c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2 /uv /usr/local/bin/uv
WORKDIR /app
COPY pyproject.toml .
# expect: unpinned-packages
RUN uv sync --no-dev
COPY Pipfile /srv/Pipfile
# expect: unpinned-packages
RUN pip install --no-cache-dir pipenv==2024.4.0 poetry==2.1.2 pdm==2.22.4 && pipenv install --system
# expect: unpinned-packages
RUN poetry install --no-root
# expect: unpinned-packages
RUN pdm install --prod
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
