# negative: weights-baked
# Folders named adapters/ and peft/ of application code copied to the application's own
# folder, not to a model path: no weights are judged by those names
FROM python:3.12-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 1000
WORKDIR /app
COPY adapters/ /app/adapters/
COPY ./peft_utils /app/peft_utils
HEALTHCHECK --interval=10s CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health')"
CMD ["python", "-m", "app"]
