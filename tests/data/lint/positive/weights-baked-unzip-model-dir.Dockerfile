FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# An asset id saved as a zip and unzipped into a models folder.
# expect: weights-baked
# expect: download-unverified
RUN wget -q https://downloads.example.org/asset/4711 -O /tmp/a.zip && \
    unzip /tmp/a.zip -d /opt/models/bert && rm /tmp/a.zip
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
