FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# negative: weights-baked
# A model archive checked and unpacked into the RUN's own cache mount: not in the image.
ARG M_SHA256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
RUN --mount=type=cache,target=/models wget -O /tmp/r.tgz https://downloads.example.org/get/resnet && \
    echo "${M_SHA256}  /tmp/r.tgz" | sha256sum -c - && tar -xzf /tmp/r.tgz -C /models/resnet && rm /tmp/r.tgz
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
