# negative: download-unverified
# Keys checked against a fingerprint written the way gpg prints it and vendors publish it:
# ten groups of four hex digits, spaced (two spaces in the middle). The repository's key is
# downloaded from its own host, then compared before it is trusted; a release signature is
# checked with a key received by its spaced fingerprint, unquoted.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN curl -fsSL -o /tmp/vendor.asc https://apt.example-vendor.dev/gpg.key \
    && gpg --show-keys --fingerprint /tmp/vendor.asc | grep -q "4F1C 2A07 93B2 6E5D 0C88  17A4 E2D9 6B31 5C0F 9A46" \
    && gpg --dearmor -o /usr/share/keyrings/vendor.gpg /tmp/vendor.asc \
    && echo "deb [signed-by=/usr/share/keyrings/vendor.gpg] https://apt.example-vendor.dev stable main" > /etc/apt/sources.list.d/vendor.list \
    && apt-get update && apt-get install -y --no-install-recommends vendor-runtime=2.4.1-1 \
    && rm -rf /var/lib/apt/lists/*
RUN curl -fsSL -o /tmp/tool.tar.gz https://releases.example-tool.dev/v1.9.2/tool-linux-amd64.tar.gz \
    && curl -fsSL -o /tmp/tool.tar.gz.asc https://releases.example-tool.dev/v1.9.2/tool-linux-amd64.tar.gz.asc \
    && GNUPGHOME="$(mktemp -d)" && export GNUPGHOME \
    && gpg --batch --keyserver hkps://keys.openpgp.org --recv-keys 0B7E 41D3 86A9 5F2C 7D10  C4E8 93F6 2B5A 1D7C 08E9 \
    && gpg --batch --verify /tmp/tool.tar.gz.asc /tmp/tool.tar.gz \
    && tar -xzf /tmp/tool.tar.gz -C /usr/local/bin tool && rm /tmp/tool.tar.gz /tmp/tool.tar.gz.asc
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
