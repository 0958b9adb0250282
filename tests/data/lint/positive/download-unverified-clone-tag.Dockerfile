# Source builds from git tags: a tag can be moved or re-created, as an image tag can, so
# only a 40-hex commit makes the build reproducible (the same rule as pip git+...@tag).
# Patterns of KServe's FlashInfer build (clone --branch v$VERSION), the AUTOMATIC1111 web
# UI images (clone, then git reset --hard to a release tag, then install), a builder stage
# whose tag checkout reaches the final image with COPY --from, and a branch for contrast.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
ARG FLASHINFER_VERSION=0.2.6.post1
# expect: download-unverified warning
RUN git clone --branch v${FLASHINFER_VERSION} --recursive https://github.com/flashinfer-ai/flashinfer.git \
    && cd flashinfer && pip wheel --no-build-isolation -w /wheels .
# expect: download-unverified
RUN git clone https://github.com/ggml-org/llama.cpp.git /src/llama.cpp
WORKDIR /src/llama.cpp
RUN git checkout tags/b4500
RUN cmake -B build -DGGML_CUDA=ON && cmake --build build --target llama-server -j

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /
# expect: download-unverified
RUN git clone https://github.com/AUTOMATIC1111/stable-diffusion-webui.git \
    && cd stable-diffusion-webui \
    && git reset --hard v1.9.4 \
    && pip install -r requirements_versions.txt
# expect: download-unverified
RUN git clone --depth 1 --branch main https://github.com/huggingface/text-embeddings-inference.git /src/tei \
    && cd /src/tei && pip install ./backends/python/server
COPY --from=build /wheels /wheels
COPY --from=build /src/llama.cpp/build/bin/llama-server /usr/local/bin/llama-server
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
