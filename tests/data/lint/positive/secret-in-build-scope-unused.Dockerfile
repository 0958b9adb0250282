# A token declared for a gated model download that the RUNs below never name: BuildKit still
# writes it into the history of every later RUN (RUN |1 HF_TOKEN=... /bin/sh -c ...).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: secret-in-build error
ARG HF_TOKEN
RUN pip install --no-cache-dir fastapi==0.111.0 uvicorn==0.30.1
COPY app /app
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
