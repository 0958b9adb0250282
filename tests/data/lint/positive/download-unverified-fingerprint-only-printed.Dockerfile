# A spaced fingerprint that appears in the RUN but checks nothing: it is only echoed into the
# log, and the key, fetched from the repository's own host, is trusted whatever it is.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: download-unverified
RUN curl -fsSL -o /tmp/vendor.asc https://apt.example-vendor.dev/gpg.key \
    && echo "expected key: 4F1C 2A07 93B2 6E5D 0C88  17A4 E2D9 6B31 5C0F 9A46" \
    && gpg --dearmor -o /usr/share/keyrings/vendor.gpg /tmp/vendor.asc \
    && echo "deb [signed-by=/usr/share/keyrings/vendor.gpg] https://apt.example-vendor.dev stable main" > /etc/apt/sources.list.d/vendor.list \
    && apt-get update && apt-get install -y --no-install-recommends vendor-runtime=2.4.1-1 \
    && rm -rf /var/lib/apt/lists/*
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
