# tts-server in a shell-form ENTRYPOINT, its released model named through an ENV value:
# Coqui TTS downloads it into ~/.local/share/tts at start
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir TTS==0.22.0
ENV TTS_MODEL=tts_models/de/thorsten/vits
USER 10001
EXPOSE 5002
HEALTHCHECK CMD curl -fsS http://127.0.0.1:5002/ || exit 1
# expect: startup-download
ENTRYPOINT tts-server --model_name "$TTS_MODEL" --port 5002
