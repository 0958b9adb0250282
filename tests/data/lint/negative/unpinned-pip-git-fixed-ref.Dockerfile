# negative: unpinned-packages, download-unverified
# git+ requirements at a 40-hex commit, given directly or by a build argument (not read from
# the network), are pinned and verified
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG WHISPER_COMMIT=0123456789abcdef0123456789abcdef01234567
RUN pip install --no-cache-dir "git+https://github.com/example/tts-server.git@0123456789abcdef0123456789abcdef01234567"
RUN pip install --no-cache-dir git+https://github.com/OHF-Voice/wyoming-faster-whisper@${WHISPER_COMMIT}
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
