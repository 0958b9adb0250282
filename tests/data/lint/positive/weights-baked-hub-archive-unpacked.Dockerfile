FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# A TF Hub model fetched by a URL without an ending (wget names it "2") and unpacked into a
# model folder by a glob: weights in the image, and an archive unpacked with no checksum.
# expect: weights-baked
# expect: download-unverified
RUN mkdir -p /models/style && \
    wget "https://tfhub.dev/acme/style-transfer/2?tf-hub-format=compressed" && \
    tar -C /models/style -zxvf ./2* && rm -f 2*
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
