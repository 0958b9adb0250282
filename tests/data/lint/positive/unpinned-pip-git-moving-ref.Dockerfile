# A git+ requirement at a ref that moves is unpinned as well as unverified: a ref named like a
# floating tag (@latest-release), and a tag read from the releases/latest API at build
# (LinuxServer's faster-whisper image, a fresh-set miss)
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG WHISPER_VERSION
# expect: download-unverified
# expect: unpinned-packages@8
RUN pip install --no-cache-dir "git+https://github.com/example/tts-server.git@latest-release"
# expect: download-unverified
# expect: unpinned-packages@11
RUN if [ -z ${WHISPER_VERSION+x} ]; then \
      WHISPER_VERSION=$(curl -sX GET "https://api.github.com/repos/OHF-Voice/wyoming-faster-whisper/releases/latest" \
      | jq -r '.tag_name'); \
    fi && \
    pip install --no-cache-dir \
      git+https://github.com/OHF-Voice/wyoming-faster-whisper@${WHISPER_VERSION}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
