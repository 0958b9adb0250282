# source: ggml-org/llama.cpp .devops/cuda.Dockerfile (patterns, condensed)
ARG UBUNTU_VERSION=24.04
ARG CUDA_VERSION=12.8.1
ARG BASE_CUDA_DEV_CONTAINER=nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION}
ARG BASE_CUDA_RUN_CONTAINER=nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}

# truth: base-unpinned
FROM ${BASE_CUDA_DEV_CONTAINER} AS build
ARG CUDA_DOCKER_ARCH=default
# truth: unpinned-packages
RUN apt-get update \
    && apt-get install -y gcc-14 g++-14 build-essential cmake python3 python3-pip git libssl-dev libgomp1
ENV CC=gcc-14 CXX=g++-14 CUDAHOSTCXX=g++-14
WORKDIR /app
COPY . .
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -B build -DGGML_NATIVE=OFF -DGGML_CUDA=ON -DLLAMA_BUILD_TESTS=OFF . \
    && cmake --build build --config Release -j$(nproc)
RUN mkdir -p /app/lib && find build -name "*.so*" -exec cp -P {} /app/lib \;
RUN mkdir -p /app/full && cp build/bin/* /app/full && cp *.py /app/full && cp requirements.txt /app/full

# truth: base-unpinned
FROM ${BASE_CUDA_RUN_CONTAINER} AS base
# truth: unpinned-packages
RUN apt-get update \
    && apt-get install -y libgomp1 curl \
    && apt autoremove -y && apt clean -y \
    && find /var/cache/apt/archives /var/lib/apt/lists -not -name lock -type f -delete
COPY --from=build /app/lib/ /app

FROM base AS full
COPY --from=build /app/full /app
WORKDIR /app
# truth: unpinned-packages
# truth: unpinned-packages
RUN apt-get update \
    && apt-get install -y git python3 python3-pip python3-wheel \
    && pip install --break-system-packages --upgrade setuptools \
    && pip install --break-system-packages -r requirements.txt
ENTRYPOINT ["/app/tools.sh"]

# truth: root-user
FROM base AS server
ENV LLAMA_ARG_HOST=0.0.0.0
COPY --from=build /app/full/llama-server /app
WORKDIR /app
HEALTHCHECK CMD [ "curl", "-f", "http://localhost:8080/health" ]
ENTRYPOINT [ "/app/llama-server" ]
