# A TorchServe base runs as model-server, but the Dockerfile switches to root for an install
# and never switches back
FROM pytorch/torchserve:0.12.0-cpu@sha256:d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4
# expect: root-user
USER root
RUN pip install --no-cache-dir onnxruntime==1.18.0
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/mnt/model-store", "--models", "all"]
