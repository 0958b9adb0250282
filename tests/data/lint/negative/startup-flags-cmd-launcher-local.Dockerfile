# The CMD is only flags for the base image's text-generation-launcher; the model is a local
# folder baked or mounted at /data, so nothing is fetched at start.
FROM ghcr.io/huggingface/text-generation-inference:2.4.1@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
USER 10001
EXPOSE 80
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:80/health || exit 1
# negative: startup-download
CMD ["--host", "0.0.0.0", "--port", "80", "--model-id", "/data/mistral-7b-instruct"]
