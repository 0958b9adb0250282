# sccache credentials in a Rust builder stage (text-embeddings-inference passes
# ACTIONS_RUNTIME_TOKEN this way): not in the final image's history, but in the build's
# provenance and cache, so a warning.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS builder
ARG ACTIONS_CACHE_URL
# expect: secret-in-build warning
ARG ACTIONS_RUNTIME_TOKEN
ARG SCCACHE_GHA_ENABLED
RUN cargo build --release --bin text-embeddings-router

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=builder /usr/src/target/release/text-embeddings-router /usr/local/bin/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
