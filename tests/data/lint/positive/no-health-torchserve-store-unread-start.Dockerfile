# The start script is not in the context servelab was given, but the image holds a TorchServe
# model store (only a model server reads .mar archives): a server without a HEALTHCHECK
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
# expect: no-health@3
RUN pip install --no-cache-dir torch-model-archiver==0.12.0 nvgpu==0.10.0
# expect: weights-baked warning
ADD handler.py start.sh model-store /srv/service/
USER 10001
# expect: startup-download info
CMD ["sh", "/srv/service/start.sh"]
