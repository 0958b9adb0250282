# negative: startup-download
# ENV names hub ids that are only the names the server answers to (a label, an alias), not
# the model it loads (that is a mounted path).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv
ENV ASR_MODEL_ID=/models/whisper-small-int8 \
    SERVED_MODEL_NAME=acme-speech/public-name \
    MODEL_ALIAS=acme-speech/whisper-small
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["uvicorn", "speech_server.main:app", "--host", "0.0.0.0", "--port", "8000"]
