FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# negative: download-unverified, weights-baked
# tar -t lists the archive and tar -c packs local files: nothing downloaded is unpacked.
RUN curl -fsSL https://downloads.example.org/get/bundle | tar -tz
RUN curl -fsSL https://downloads.example.org/meta.json -o /tmp/meta.json && tar -czf /tmp/etc.tgz /etc
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
