# Installers piped into a shell, as Rust and uv are often installed in serving builders
# (text-embeddings-inference's builder, KServe's base stage).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS builder
ENV PATH="/root/.cargo/bin:${PATH}"
# expect: download-unverified
RUN curl https://sh.rustup.rs -sSf | bash -s -- -y
# expect: download-unverified
RUN curl -LsSf https://astral.sh/uv/install.sh | sh && \
    ln -s /root/.local/bin/uv /usr/local/bin/uv
# expect: download-unverified
RUN set -eux; \
    curl --proto '=https' --tlsv1.2 -sSf https://just.systems/install.sh | \
    sed "s|https://github.com|https://mirror.example|g" | \
    bash -s -- --tag 1.42.4 --to /usr/local/bin

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=builder /usr/local/bin/uv /usr/local/bin/uv
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
