# A TorchServe image with its models inside: archives copied by name, a store folder copied
# without the build context (judged by its name only, so at a lower severity), and an
# archive packed at build time from a serialized checkpoint.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /opt/ts
# expect: weights-baked
COPY artifacts/*.mar /opt/ts/store/
# expect: weights-baked warning
COPY model_store/ /opt/ts/model_store/
COPY handlers/ /opt/ts/handlers/
# expect: weights-baked
RUN torch-model-archiver --model-name sentiment --version 2.1 \
      --serialized-file /opt/ts/checkpoints/sentiment_ft.pt \
      --handler /opt/ts/handlers/text_handler.py --export-path /opt/ts/store
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/opt/ts/store"]
