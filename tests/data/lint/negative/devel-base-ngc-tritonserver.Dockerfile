# negative: devel-base
# NGC's serving image (Triton) is not an SDK image
FROM nvcr.io/nvidia/tritonserver:24.05-py3@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK CMD ["curl", "-fsS", "http://127.0.0.1:8000/v2/health/ready"]
CMD ["tritonserver", "--model-repository=/models"]
