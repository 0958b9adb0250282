# negative: root-user
# A files-only image (a backend bundle another program unpacks, as LocalAI's are): FROM
# scratch with no CMD or ENTRYPOINT cannot be run as it is, so no user runs it
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS builder
RUN python -m venv /opt/backend
FROM scratch
COPY --from=builder /opt/backend /
