# negative: weights-baked, download-unverified
# aria2c fetching a data sample and a dataset index (no weights), and an installer it checks
# against a digest written here (--checksum fails the download on a mismatch)
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN aria2c -x 4 https://example.com/corpora/wiki-sample.jsonl -d /srv/data --allow-overwrite=true
RUN aria2c -d /tmp -o index.json https://example.com/datasets/index.json
RUN aria2c --checksum=sha-256=0000000000000000000000000000000000000000000000000000000000000000 -d /tmp -o uv.tar.gz https://github.com/astral-sh/uv/releases/download/0.5.1/uv-x86_64-unknown-linux-gnu.tar.gz && tar -xzf /tmp/uv.tar.gz -C /opt
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
