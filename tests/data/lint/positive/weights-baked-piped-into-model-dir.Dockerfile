FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# A download with no archive ending piped into tar, unpacked into /models: weights, and an
# archive unpacked unchecked.
# expect: weights-baked
# expect: download-unverified
RUN curl -fsSL https://downloads.example.org/get/resnet | tar -xz -C /models/resnet
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
