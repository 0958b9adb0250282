# Model weights copied from cloud storage at build time: gsutil -m and aws s3 cp of a
# model folder and a safetensors file.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
# expect: weights-baked
RUN gsutil -m cp -r gs://acme-models/models/llama-3-8b /opt/models/
# expect: weights-baked
RUN aws s3 cp s3://acme-models/ranker/model.safetensors /opt/ranker/model.safetensors
EXPOSE 8000
USER 10001
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model", "/opt/models/llama-3-8b"]
