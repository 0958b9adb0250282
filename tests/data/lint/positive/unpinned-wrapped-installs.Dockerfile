# Installs that are easy to read past: pip run through `conda run` inside an environment,
# a doubled `install` (a typo pip would read as a package named install, hiding nothing),
# a quoted conda spec whose version comes from a command substitution, and apt-get under
# BuildKit cache and image mounts.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG CUDA_VERSION=12.1.0
# expect: unpinned-packages
RUN conda run --no-capture-output -n serving python -m pip install install uvicorn "httpx==0.27.0"
# expect: unpinned-packages
RUN conda install -y -c nvidia "cuda-runtime=$(echo $CUDA_VERSION | cut -d. -f1-2)" cupy
# expect: unpinned-packages
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=from=127.0.0.1:5000/servelab/tools:1@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1,source=/bin/tool,target=/usr/local/bin/tool \
    apt-get update && apt-get install -y --no-install-recommends libsndfile1 \
    && rm -rf /var/lib/apt/lists/*
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
