# negative: unpinned-packages
# apt-get given package files on disk (a vendor's unpacked bundle, a file fetched to /tmp):
# their version is the file's, not a repository's choice. Pinned conda updates and a pip
# run through `conda run` with pins are fine too.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY vendor/ /opt/vendor/
RUN apt-get install -y ./opt/vendor/RPMS/libfabric* /opt/vendor/driver_5.2-1_amd64.deb \
    && dpkg -i /tmp/*.deb || true
RUN conda update -y -n base "conda=24.7.1" && conda run -n serving pip install "uvicorn==0.30.1"
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
