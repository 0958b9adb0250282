# A shell-form ENTRYPOINT whose --model is ${VAR:-default} with a hub id as the default: the
# variable is unset in the image, so the shell gives the default, downloaded at every start.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
# expect: startup-download error
ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --port 8000 \
    --model ${SERVED_FROM:-acme-labs/tiny-chat-7b} ${EXTRA:+--max-model-len "$EXTRA"}
