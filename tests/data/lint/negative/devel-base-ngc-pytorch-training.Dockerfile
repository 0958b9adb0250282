# negative: devel-base
# A training job on NGC's PyTorch container: the SDK is what it needs, nothing serves
FROM nvcr.io/nvidia/pytorch:24.05-py3@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
COPY train.py /workspace/train.py
CMD ["python", "/workspace/train.py", "--epochs", "10"]
