# The ENV names the model and the CMD passes the same hub id: one download at start, one
# finding at the CMD, whose message names the ENV too. A different id in another ENV is
# another model: its own finding (a warning, at the ENTRYPOINT that starts the server).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV MODEL_ID=acme-llm/chat-7b \
    DRAFT_MODEL_ID=acme-llm/draft-1b \
    PORT=8080
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/health || exit 1
# expect: startup-download warning
ENTRYPOINT ["text-generation-launcher"]
# expect: startup-download
CMD ["--model-id", "acme-llm/chat-7b", "--port", "8080"]
