# pip installs that take whatever a URL or a branch holds on the day of the build: a prebuilt
# CUDA wheel from a release URL with no hash (h2oGPT, text-generation-webui), transformers'
# main branch, a release tag (a tag can be moved, as an image tag can), and a source build of
# the default branch through uv.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG LLAMA_CPP_WHEEL=https://github.com/abetlen/llama-cpp-python/releases/download/v0.3.2-cu124/llama_cpp_python-0.3.2-cp311-cp311-linux_x86_64.whl
# expect: download-unverified
RUN pip install --no-cache-dir ${LLAMA_CPP_WHEEL}
# expect: download-unverified
RUN pip install --no-cache-dir "git+https://github.com/huggingface/transformers@main"
# expect: download-unverified
RUN python3 -m pip install --no-cache-dir "git+https://github.com/vllm-project/vllm.git@v0.6.3#egg=vllm"
# expect: download-unverified
RUN uv pip install --system "flash-attn @ git+https://github.com/Dao-AILab/flash-attention.git"
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
