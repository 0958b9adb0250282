# negative: weights-baked
# torch-model-archiver without --serialized-file packs only a handler (the handler fetches
# nothing here; the model comes from a mounted volume at start).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /opt/ts
COPY handlers/ /opt/ts/handlers/
RUN torch-model-archiver --model-name echo --version 1.0 \
      --handler /opt/ts/handlers/echo_handler.py --export-path /opt/ts/store
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/opt/ts/store"]
