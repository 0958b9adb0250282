# source: ggml-org/whisper.cpp .devops/main-cuda.Dockerfile (CUDA devel build stage, runtime stage that copies /app; patterns)
ARG UBUNTU_VERSION=22.04
ARG CUDA_VERSION=12.3.1
ARG BASE_CUDA_DEV_CONTAINER=nvidia/cuda:${CUDA_VERSION}-devel-ubuntu${UBUNTU_VERSION}
ARG BASE_CUDA_RUN_CONTAINER=nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu${UBUNTU_VERSION}

# truth: base-unpinned
FROM ${BASE_CUDA_DEV_CONTAINER} AS build
WORKDIR /app
ARG CUDA_DOCKER_ARCH=all
ENV CUDA_DOCKER_ARCH=${CUDA_DOCKER_ARCH}
# truth: unpinned-packages
RUN apt-get update && \
    apt-get install -y build-essential libsdl2-dev wget cmake git \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*
ENV CUDA_MAIN_VERSION=12.3
ENV LD_LIBRARY_PATH=/usr/local/cuda-${CUDA_MAIN_VERSION}/compat:$LD_LIBRARY_PATH
# miss: context-leak (the builder stage's COPY . reaches the final image through COPY --from=build /app; builder-stage copies are exempt)
COPY . .
# truth: weights-baked (make base.en runs the Makefile's download script; found since issue 26 reads Makefile recipes)
RUN --mount=type=secret,id=HF_TOKEN,required=false,env=HF_TOKEN make base.en CMAKE_ARGS="-DGGML_CUDA=1 -DCMAKE_CUDA_ARCHITECTURES='75;80;86;90'"

# truth: base-unpinned
# truth: root-user
FROM ${BASE_CUDA_RUN_CONTAINER} AS runtime
WORKDIR /app
# truth: unpinned-packages
RUN apt-get update && \
    apt-get install -y curl ffmpeg wget cmake git \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*
COPY --from=build /app /app
ENV PATH=/app/build/bin:$PATH
ENTRYPOINT [ "bash", "-c" ]
