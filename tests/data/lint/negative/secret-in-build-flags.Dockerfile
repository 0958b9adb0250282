# negative: secret-in-build
# Switches and settings whose names hold a secret word (vLLM's sccache flag, tokenizer and
# hub settings): none is a credential.
ARG SCCACHE_S3_NO_CREDENTIALS=0
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG SCCACHE_S3_NO_CREDENTIALS
ARG USE_AUTH_TOKEN=true
ENV TOKENIZERS_PARALLELISM=false \
    HF_HUB_DISABLE_IMPLICIT_TOKEN=1 \
    MAX_TOTAL_TOKENS=4096 \
    MAX_BATCH_PREFILL_TOKENS=8192 \
    PASSWORD_MIN_LENGTH=12
RUN export SCCACHE_S3_NO_CREDENTIALS=${SCCACHE_S3_NO_CREDENTIALS} && echo build
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
