# negative: download-unverified
# Network calls that fetch no code to run: a signing key into gpg, an API answer parsed by
# python -c, a model-free readiness probe, a requirements file read by pip.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN curl -fsSL https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub \
    | gpg --dearmor -o /usr/share/keyrings/cuda.gpg
RUN curl -s https://api.github.com/repos/vllm-project/vllm/releases/latest \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["tag_name"])' > /tmp/latest
RUN curl -fsS -o /etc/apt/sources.list.d/cuda.list https://example.org/apt/cuda.list
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
