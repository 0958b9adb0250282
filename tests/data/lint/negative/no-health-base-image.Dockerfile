# negative: no-health
# A base/dev image other Dockerfiles build FROM (SGLang's dev image): no start command of
# its own, nothing to probe.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir torch==2.3.1
USER 10001
WORKDIR /sgl-workspace
