# negative: download-unverified
# The same direct reference, its archive checked by the #sha256= fragment pip verifies
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir "wyoming-faster-whisper[sherpa] @ https://github.com/rhasspy/wyoming-faster-whisper/archive/refs/tags/v2.4.0.tar.gz#sha256=4c1f9b5e7d2a3f6e8b0c9d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a"
USER 10001
HEALTHCHECK CMD ["true"]
CMD ["python", "-m", "wyoming_faster_whisper", "--uri", "tcp://0.0.0.0:10300", "--model", "/models/tiny-int8"]
