# negative: weights-baked
# Cloud copies at build time that fetch configuration and an upload of a build report: no
# weights.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
RUN aws s3 cp s3://acme-config/serving/config.yaml /etc/acme/config.yaml
RUN gsutil cp /app/build-report.json gs://acme-reports/
EXPOSE 8000
USER 10001
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model", "/mnt/models/llama"]
