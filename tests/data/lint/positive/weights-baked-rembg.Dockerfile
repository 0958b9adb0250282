FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "rembg[cli]==2.0.59"
# expect: weights-baked
RUN rembg d u2net
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["rembg", "s", "--host", "0.0.0.0", "--port", "8000"]
