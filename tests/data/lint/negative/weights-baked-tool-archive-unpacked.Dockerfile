FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# negative: weights-baked, download-unverified
# A release tarball of a tool, checked against a written digest and unpacked into
# /usr/local: not weights, and verified.
ARG TOOL_SHA256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
RUN wget -O /tmp/tool.tar.gz https://github.com/acme/tool/releases/download/v1.2.3/tool-linux && \
    echo "${TOOL_SHA256}  /tmp/tool.tar.gz" | sha256sum -c - && \
    tar -xzf /tmp/tool.tar.gz -C /usr/local/bin
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
