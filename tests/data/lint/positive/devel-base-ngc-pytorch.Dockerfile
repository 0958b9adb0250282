# NGC's PyTorch container is the whole CUDA toolkit (nvcc, headers), whatever its tag says
# expect: devel-base
FROM nvcr.io/nvidia/pytorch:24.05-py3@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "-m", "server"]
