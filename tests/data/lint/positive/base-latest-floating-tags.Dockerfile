# Floating tags: latest-* (text-generation-inference's cargo-chef builder), nightly, and
# an untagged COPY --from image.
# expect: base-unpinned
# expect: base-latest
FROM lukemathwalker/cargo-chef:latest-rust-1.71 AS chef
# expect: base-unpinned
# expect: base-latest
FROM rocm/pytorch:nightly AS rocm
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=chef /usr/local/cargo/bin/cargo-chef /usr/local/bin/
# expect: base-unpinned
# expect: base-latest
COPY --from=ghcr.io/astral-sh/uv /uv /bin/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
