# negative: unpinned-packages
# pip reads a word with a slash as a local path: one artifact from the context
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /src
COPY csrc/ ./csrc/
RUN pip install --no-cache-dir csrc/layer_norm && pip --cache-dir /tmp/pc install fastapi==0.111.0
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "http.server", "8000"]
