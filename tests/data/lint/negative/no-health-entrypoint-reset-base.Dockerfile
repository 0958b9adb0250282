# negative: no-health
# A base image for others' servers: EXPOSE 8000 but ENTRYPOINT [] and no CMD, so it has no
# command at all (the reset clears the base's CMD); the images built FROM it start the server
FROM python:3.12.7-slim-bookworm@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir "litserve==0.2.16"
USER 10001
WORKDIR /app
EXPOSE 8000
ENTRYPOINT []
