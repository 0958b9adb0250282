# the install command is kept in an ENV variable, with pip's general options before install
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV PIP_INSTALL="python -m pip --no-cache-dir install --upgrade"
# expect: unpinned-packages
RUN $PIP_INSTALL fastapi uvicorn==0.30.1
# expect: unpinned-packages
RUN pip --cache-dir /tmp/pipcache install requests
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "http.server", "8000"]
