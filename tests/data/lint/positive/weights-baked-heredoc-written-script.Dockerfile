# A download script written by a here-document and run by the next RUN (runpod-style
# workers that bake the model into the image). The body is read as a script of its own: an
# apostrophe in its comment does not hide the line after it.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: weights-baked
RUN cat > /opt/fetch_model.sh <<'SH'
# don't keep the hub cache: only the snapshot is needed
huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir /models/qwen
SH
RUN sh /opt/fetch_model.sh
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server", "--model-dir", "/models/qwen"]
