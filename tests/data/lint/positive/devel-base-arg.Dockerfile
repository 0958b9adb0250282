ARG CUDA_TAG=12.4.1-devel-ubuntu22.04
# expect: devel-base
FROM nvidia/cuda:${CUDA_TAG}@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
