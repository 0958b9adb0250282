# negative: startup-download
# The ENV names a hub id, but the image runs offline: the id resolves from the mounted cache.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV WHISPER_MODEL=acme-speech/whisper-small-int8 \
    HF_HUB_OFFLINE=1 \
    HF_HOME=/models/hf
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["uvicorn", "main:app", "--host", "0.0.0.0", "--port", "8000"]
