# GPUStack's image: its server starts as `gpustack start`, no EXPOSE.
# expect: no-health
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "gpustack==0.7.1"
USER 10001
ENTRYPOINT ["gpustack", "start"]
