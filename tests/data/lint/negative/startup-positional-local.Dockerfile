# negative: startup-download
# the positional model is a mounted path; python -m's module is never a model; -m with a file
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
ENV HF_HUB_OFFLINE=0
CMD ["lmdeploy", "serve", "api_server", "/models/internlm2_5-7b-chat", "--server-port", "8000"]
