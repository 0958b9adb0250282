# negative: download-unverified
# Downloads and clones followed across RUNs and stages that are checked before use: the
# dependency script checked against a written digest in the RUN that runs it, a clone at a
# commit copied into the final stage and installed there, a release tag clone, and a data
# file that nothing runs.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS deps
ARG INSTALL_DEPS_SHA256=5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f
RUN curl -fsSL -o /opt/install_deps https://raw.githubusercontent.com/triton-inference-server/server/r24.08/build/install_deps
RUN echo "${INSTALL_DEPS_SHA256}  /opt/install_deps" | sha256sum -c - && sh /opt/install_deps --cuda 12.4
RUN curl -fsSL -o /opt/imagenet_classes https://raw.githubusercontent.com/pytorch/hub/c7895df70c7767403e36f82786d6b611b7984557/imagenet_classes.txt
RUN wc -l /opt/imagenet_classes

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS src
RUN git clone https://github.com/Dao-AILab/flash-attention.git /src/flash-attention \
    && cd /src/flash-attention && git checkout 4d2e8a1c4d2e8a1c4d2e8a1c4d2e8a1c4d2e8a1c
RUN git clone --depth 1 --branch v0.3.10 https://github.com/comfyanonymous/ComfyUI.git /src/ComfyUI

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=deps /opt/imagenet_classes /srv/imagenet_classes
COPY --from=src /src/flash-attention /opt/flash-attention
COPY --from=src /src/ComfyUI /app/ComfyUI
RUN pip install --no-build-isolation /opt/flash-attention && cd /app/ComfyUI && pip install --no-cache-dir .
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
