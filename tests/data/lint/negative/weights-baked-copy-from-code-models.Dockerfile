# negative: weights-baked
# A stage that builds code into a folder named models/ (a Python package of ORM models) and
# downloads nothing: its COPY --from is not judged by the folder's name
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS build
RUN mkdir -p /app/models && printf 'class User: ...\n' > /app/models/__init__.py
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
COPY --from=build /app/models /app/models
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "-m", "app"]
