# negative: base-unpinned, download-unverified
# syntax=docker/dockerfile:1
FROM python:3.11.9-slim-bookworm@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
RUN << EOF2
pip install --no-cache-dir fastapi==0.111.0
EOF2
COPY <<-CONF /etc/app.conf
	port=8000
	CONF
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
