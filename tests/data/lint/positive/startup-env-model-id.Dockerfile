# The image names its model only in an ENV (the server reads it); nothing in the build fetches
# or copies that hub id and HF_HUB_OFFLINE is unset: the server downloads it at start.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv
ENV ASR__MODEL=acme-speech/whisper-small-int8 \
    ASR__DEVICE=cpu
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
# expect: startup-download warning
CMD ["uvicorn", "speech_server.main:app", "--host", "0.0.0.0", "--port", "8000"]
