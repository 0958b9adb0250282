# negative: download-unverified, weights-baked
# The bucket's installer checked against a digest written in the Dockerfile before it runs,
# and a timm model built without pretrained weights.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
RUN gsutil cp gs://acme-tools/agent/install.sh /tmp/install.sh \
    && echo "2b3c1d2e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c  /tmp/install.sh" | sha256sum -c - \
    && bash /tmp/install.sh
RUN python -c "import timm; timm.create_model('convnext_tiny', pretrained=False)"
EXPOSE 8000
USER 10001
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model", "/mnt/models/llama"]
