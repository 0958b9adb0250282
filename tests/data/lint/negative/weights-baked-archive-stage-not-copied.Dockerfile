# negative: weights-baked
# A stage packs a TorchServe archive for a test image, but the final image copies nothing
# from it and fetches its archives from a mounted model store: no weights in this image.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS archive
WORKDIR /build
RUN torch-model-archiver --model-name resnet --version 1.0 --serialized-file /build/resnet.pt \
        --handler image_classifier --export-path model-store

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/mnt/model-store", "--models", "all"]
