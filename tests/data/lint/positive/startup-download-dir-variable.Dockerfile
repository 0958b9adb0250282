# The model comes from a variable the image does not set (the deployer's hub id), and the
# server is told where to download it: the download happens at every start.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV HF_HOME=/cache/hf
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
# expect: startup-download error
CMD ["sh", "-c", "vllm serve \"$MODEL_ID\" --download-dir /cache/hf --port 8000"]
