# negative: base-latest
# Tags that carry a build date name one build, unlike nightly or latest: a TPU nightly of
# a given day, a dated release and a date-only tag.
FROM 127.0.0.1:5000/pytorch-xla/xla:nightly_3.10_tpuvm_20241017@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS xla
FROM 127.0.0.1:5000/acme/runtime:nightly-2024.10.17@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS runtime
FROM 127.0.0.1:5000/acme/server:20241017@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
COPY --from=xla /opt/xla /opt/xla
COPY --from=runtime /opt/rt /opt/rt
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
