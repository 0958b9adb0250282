# negative: unpinned-packages
# uv pip options that take values (--torch-backend, --index-strategy, -p) are not packages;
# versions from ARGs are pins (KServe's vllm[...]==${VLLM_VERSION}).
# A wheel URL with its #sha256= fragment is one verified artifact.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG VLLM_VERSION=0.9.0.1
ARG LMCACHE_VERSION=0.3.0
RUN uv pip install --system --torch-backend auto --index-strategy unsafe-best-match -p 3.11 \
    "vllm[runai,tensorizer]==${VLLM_VERSION}" lmcache==${LMCACHE_VERSION}
RUN pip install --no-cache-dir https://download.pytorch.org/whl/cu128/flashinfer/flashinfer_python-0.2.6.post1-cp39-abi3-linux_x86_64.whl#sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
