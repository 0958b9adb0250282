# A Triton model repository copied into the image from a build context servelab was not
# given: judged by the folder's name (a warning), as a model store is
FROM nvcr.io/nvidia/tritonserver:24.05-py3@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 1000
# expect: weights-baked warning
COPY model_repository/ /opt/tritonserver/model_repository/
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/v2/health/ready || exit 1
CMD ["tritonserver", "--model-repository=/opt/tritonserver/model_repository"]
