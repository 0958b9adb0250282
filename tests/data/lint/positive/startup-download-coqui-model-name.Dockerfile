# Coqui TTS given a released model by name downloads it at start (from its release hosts:
# HF_HUB_OFFLINE does not stop it)
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir TTS==0.22.0
ENV HF_HUB_OFFLINE=1
USER 10001
EXPOSE 5002
HEALTHCHECK CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:5002/')"]
# expect: startup-download
CMD ["python3", "-m", "TTS.server.server", "--model_name", "tts_models/en/ljspeech/tacotron2-DDC", "--vocoder_name", "vocoder_models/en/ljspeech/hifigan_v2", "--port", "5002"]
