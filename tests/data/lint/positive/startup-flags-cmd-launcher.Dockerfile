# The CMD is only flags: the base image's ENTRYPOINT (text-generation-launcher) gets them,
# so --model-id names the model it downloads at start (not --host).
FROM ghcr.io/huggingface/text-generation-inference:2.4.1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
USER 10001
EXPOSE 80
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:80/health || exit 1
# expect: startup-download error
CMD ["--host", "0.0.0.0", "--port", "80", "--model-id", "mistralai/Mistral-7B-Instruct-v0.3"]
