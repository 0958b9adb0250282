# negative: startup-download
# Coqui TTS given the model's files on a mounted volume (--model_path, --config_path)
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir TTS==0.22.0
USER 10001
EXPOSE 5002
HEALTHCHECK CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:5002/')"]
CMD ["tts-server", "--model_path", "/models/tts/model.pth", "--config_path", "/models/tts/config.json", "--port", "5002"]
