# negative: download-unverified
# Source checkouts pinned to a 40-hex commit before they are built (vLLM's FlashInfer note;
# the same with git 2.49's clone --revision), a clone at a tag whose ref still holds a
# variable no ARG sets (not judged), and a clone that is never built. A tag is mutable:
# the clone of a tag is in the positive download-unverified-clone-tag.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG FLASHINFER_VERSION
RUN git clone --branch v${FLASHINFER_VERSION} --recursive https://github.com/flashinfer-ai/flashinfer.git \
    && cd flashinfer && pip install --no-build-isolation .
RUN git clone --revision 524304395bd1d8cd7d07db083859523fcaa246a4 --depth 1 https://github.com/vllm-project/flash-attention.git \
    && cd flash-attention && pip install --no-build-isolation .
RUN git clone https://github.com/flashinfer-ai/flashinfer.git --recursive \
    && cd flashinfer \
    && git checkout 524304395bd1d8cd7d07db083859523fcaa246a4 \
    && python3 setup.py bdist_wheel --dist-dir=dist
RUN git clone https://github.com/zsh-users/zsh-autosuggestions /root/.zsh/zsh-autosuggestions
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
