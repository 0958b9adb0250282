# A global ARG counts in a stage once declared again there: the final stage redeclares
# it (error), the builder does not (nothing there).
ARG HF_TOKEN
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS deps
RUN pip download --dest /wheels torch==2.3.1

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: secret-in-build error
ARG HF_TOKEN
COPY --from=deps /wheels /wheels
RUN pip install --no-index --find-links /wheels torch==2.3.1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
