# negative: no-health, startup-download
# An init container that fetches the model into a shared volume and exits (KServe's
# storage-initializer): downloading at start is its job, and it serves nothing.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY ./storage-initializer /storage-initializer
USER 1000
ENTRYPOINT ["/storage-initializer/scripts/initializer-entrypoint"]
