# negative: startup-download
# The ENV names the model the CMD passes, and the CMD runs the server offline: the id
# resolves from the mounted cache, so neither the CMD nor the ENV downloads it.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV MODEL_ID=acme-llm/chat-7b
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/health || exit 1
CMD ["sh", "-c", "HF_HUB_OFFLINE=1 exec text-generation-launcher --model-id acme-llm/chat-7b --port 8080"]
