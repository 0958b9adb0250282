# Verification that is only a mention (CUDA-based serving builders, llama.cpp and Ollama release
# installs): gnupg and gpg-agent installed beside the CUDA keyring .deb that is installed
# straight from the download, a copied *.gpg keyring that checks nothing, a checksum file and
# a signing key fetched from the same host as the file they should check.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS cuda
COPY keys/nvidia-devtools.gpg /usr/share/keyrings/nvidia-devtools.gpg
# expect: download-unverified
RUN apt-get update && apt-get install -y --no-install-recommends \
        gnupg=2.2.40-1.1 gpg-agent=2.2.40-1.1 wget=1.21.3-1+b2 \
    && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
    && dpkg -i cuda-keyring_1.1-1_all.deb && rm cuda-keyring_1.1-1_all.deb
# expect: download-unverified
RUN gpg --show-keys /usr/share/keyrings/nvidia-devtools.gpg \
    && curl -fsSL -o /tmp/nsight.run https://developer.download.nvidia.com/devtools/nsight-systems/nsight-systems-2024.6.1.run \
    && sh /tmp/nsight.run --quiet --accept

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS llamacpp
ARG LLAMA_TAG=b4500
WORKDIR /opt/llama
# expect: download-unverified
RUN curl -fsSLO https://github.com/ggml-org/llama.cpp/releases/download/${LLAMA_TAG}/llama-${LLAMA_TAG}-bin-ubuntu-x64.zip \
    && curl -fsSLO https://github.com/ggml-org/llama.cpp/releases/download/${LLAMA_TAG}/llama-${LLAMA_TAG}-bin-ubuntu-x64.zip.sha256 \
    && sha256sum -c llama-${LLAMA_TAG}-bin-ubuntu-x64.zip.sha256 \
    && unzip llama-${LLAMA_TAG}-bin-ubuntu-x64.zip
# expect: download-unverified
RUN curl -fsSL -o /tmp/ollama.tgz https://ollama.com/download/ollama-linux-amd64.tgz \
    && curl -fsSL -o /tmp/ollama.tgz.asc https://ollama.com/download/ollama-linux-amd64.tgz.asc \
    && curl -fsSL https://ollama.com/download/ollama.asc | gpg --import \
    && gpg --verify /tmp/ollama.tgz.asc /tmp/ollama.tgz \
    && tar -C /usr -xzf /tmp/ollama.tgz

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=llamacpp /opt/llama/build/bin/llama-server /usr/local/bin/llama-server
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
