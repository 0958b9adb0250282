# negative: startup-download
# The same form, but the default is a path under the mounted model directory, and a variable
# whose default is a hub id is overridden by the image's own ENV with a local path.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV CHAT_MODEL=/models/chat
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --port 8000 \
    --model ${CHAT_MODEL:-acme-labs/tiny-chat-7b} --tokenizer ${TOKENIZER:-/models/tok}
