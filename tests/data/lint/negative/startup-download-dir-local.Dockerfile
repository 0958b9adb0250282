# negative: startup-download
# A variable model without --download-dir (it may name a mounted path: servelab cannot tell),
# and --download-dir with a model under the mounted directory.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["sh", "-c", "vllm serve \"$MODEL_PATH\" --port 8000 || vllm serve /models/chat --download-dir /models/hf --port 8001"]
