# The download in one RUN and its use in a later one (Triton's dependency script saved
# without an extension then run, a source tarball saved by a redirection then unpacked), and
# a branch clone made in a builder stage that reaches the final stage through COPY --from and
# is installed there (flash-attention and ComfyUI-style source builds).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS deps
WORKDIR /opt
# expect: download-unverified
RUN curl -fsSL https://raw.githubusercontent.com/triton-inference-server/server/main/build/install_deps -o /opt/install_deps
RUN chmod 755 /opt/install_deps
RUN /opt/install_deps --cuda 12.4
# expect: download-unverified
RUN curl -fsSL https://codeload.github.com/comfyanonymous/ComfyUI/tar.gz/refs/heads/master > /opt/comfyui-src
RUN mkdir -p /opt/comfyui && tar -xzf /opt/comfyui-src -C /opt/comfyui --strip-components=1

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS src
# expect: download-unverified
RUN git clone --depth 1 https://github.com/Dao-AILab/flash-attention.git /src/flash-attention

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=deps /opt/comfyui /app/comfyui
COPY --from=src /src/flash-attention /opt/flash-attention
RUN pip install --no-build-isolation /opt/flash-attention
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
