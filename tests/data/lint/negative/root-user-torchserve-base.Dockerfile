# negative: root-user, no-health
# TorchServe's images end with USER model-server: with no USER of its own, the image runs as
# that user; the model store is mounted at run time
FROM pytorch/torchserve:0.12.0-cpu@sha256:d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/mnt/model-store", "--models", "all", "--disable-token-auth"]
