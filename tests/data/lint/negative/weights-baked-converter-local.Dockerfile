# negative: weights-baked
# the converter reads a checkpoint mounted at build time from the context, not the hub
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS convert
RUN pip install --no-cache-dir ctranslate2==4.4.0 transformers==4.44.2
RUN --mount=type=bind,source=ckpt,target=/ckpt ct2-transformers-converter --model /ckpt --output_dir /ct2

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=convert /ct2 /opt/whisper
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model-dir", "/opt/whisper"]
