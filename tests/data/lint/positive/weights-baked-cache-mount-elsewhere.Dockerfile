# A cache mount keeps only what is written inside it: this RUN mounts a cache at
# /root/.cache but writes the weights to /srv/models (in the layer), and the next RUN
# downloads into the cache and then copies the model out of it into the image.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: weights-baked
RUN --mount=type=cache,target=/root/.cache wget -O /srv/models/model.safetensors https://example.com/org/model.safetensors
# expect: weights-baked
RUN --mount=type=cache,target=/root/.cache/huggingface hf download org/model && cp -r /root/.cache/huggingface/hub /srv/hub
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
