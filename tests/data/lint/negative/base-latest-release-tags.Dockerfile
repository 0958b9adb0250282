# negative: base-latest, base-unpinned
# Release tags that merely contain a floating word, and COPY --from of stages (by name and
# by index) and of a digest-pinned image.
FROM 127.0.0.1:5000/nvidia/tritonserver:24.05-trtllm-python-py3@sha256:2381d6aa60c326b71fd40023f921a0a3b8f91b14d5db6b90402e65a635053709 AS trt
FROM 127.0.0.1:5000/runpod/worker-v1-vllm:v2.5.0stable-cuda12.1.0@sha256:2381d6aa60c326b71fd40023f921a0a3b8f91b14d5db6b90402e65a635053709 AS worker
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=trt /opt/tritonserver/bin/tritonserver /usr/local/bin/
COPY --from=1 /src/handler.py /app/
COPY --from=ghcr.io/astral-sh/uv:0.5.1@sha256:2381d6aa60c326b71fd40023f921a0a3b8f91b14d5db6b90402e65a635053709 /uv /bin/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
