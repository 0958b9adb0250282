FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# negative: download-unverified
# A hub model archive checked against a written digest before it is unpacked (into a
# folder that is no model folder): verified. Its weights-baked finding is the positive
# fixture's concern; here the archive goes to /tmp and is removed with the layer's files.
ARG M_SHA256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
RUN wget -O /tmp/m.bin https://downloads.example.org/asset/99 && \
    echo "${M_SHA256}  /tmp/m.bin" | sha256sum -c - && \
    unzip /tmp/m.bin -d /opt/app/static
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
