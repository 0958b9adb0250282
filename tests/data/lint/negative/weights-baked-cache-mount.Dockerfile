# negative: weights-baked
# Downloads into a RUN's cache or tmpfs mount never reach the image (BuildKit keeps the
# mount out of the layer): the Hugging Face cache (HF_HOME, an ARG-given target, mount keys
# in any case, dst= for target=), an explicit --local-dir inside the mount, and a tmpfs.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG HF_CACHE=/root/.cache/huggingface
ENV HF_HOME=${HF_CACHE}
RUN --mount=type=cache,target=${HF_CACHE} python -c "from huggingface_hub import snapshot_download; snapshot_download('org/model')"
RUN --mount=Type=Cache,Target=/root/.cache/huggingface huggingface-cli download org/model --local-dir /root/.cache/huggingface/m
RUN --mount=type=cache,dst=/root/.cache/huggingface,sharing=locked hf download org/model
RUN --mount=type=tmpfs,destination=/scratch cd /scratch && wget https://example.com/org/model.safetensors && python -c "print('converted')"
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
