# A PEP 508 direct reference to a source archive, with no #sha256= or --hash
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
ARG WHISPER_VERSION=2.4.0
# expect: download-unverified
RUN pip install --no-cache-dir "wyoming-faster-whisper[sherpa] @ https://github.com/rhasspy/wyoming-faster-whisper/archive/refs/tags/v${WHISPER_VERSION}.tar.gz"
USER 10001
HEALTHCHECK CMD ["true"]
CMD ["python", "-m", "wyoming_faster_whisper", "--uri", "tcp://0.0.0.0:10300", "--model", "/models/tiny-int8"]
