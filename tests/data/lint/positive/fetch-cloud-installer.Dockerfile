# An installer copied from a bucket and run with nothing to check it, and pretrained vision
# weights fetched by timm in a build step.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
# expect: download-unverified
RUN aws s3 cp s3://acme-tools/agent/install.sh /tmp/ && bash /tmp/install.sh
# expect: weights-baked
RUN python -c "import timm; timm.create_model('convnext_tiny', pretrained=True)"
EXPOSE 8000
USER 10001
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model", "/mnt/models/llama"]
