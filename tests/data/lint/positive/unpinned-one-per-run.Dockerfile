# One finding per RUN and package manager, naming every package: apt-get runs three times
# and uv pip twice (an if/else on the platform, as in vLLM's OpenAI stage); a range
# written around an ARG (bitsandbytes>=${BNB_VERSION}) is still a range.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG TARGETPLATFORM
ARG BNB_VERSION
# expect: unpinned-packages
# expect: unpinned-packages
RUN apt-get update -y \
    && apt-get install -y ccache software-properties-common git curl \
    && apt-get install -y ffmpeg libsm6 libxext6 libgl1 \
    && apt-get install -y --no-install-recommends libibverbs-dev \
    && if [ "$TARGETPLATFORM" = "linux/arm64" ]; then \
        uv pip install --system accelerate hf_transfer 'modelscope!=1.15.0' "bitsandbytes>=${BNB_VERSION}" 'timm==0.9.10'; \
    else \
        uv pip install --system accelerate hf_transfer 'bitsandbytes>=0.45.3' boto3 runai-model-streamer[s3]; \
    fi
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
