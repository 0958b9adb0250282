# A builder stage's download is reported once, at the downloading RUN (its message names the
# COPY --from that brings it in), not again at the COPY --from of the folder
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS downloader
RUN mkdir -p /comfyui/models/checkpoints
# expect: weights-baked
RUN wget -q -O /comfyui/models/checkpoints/sd_xl_base_1.0.safetensors https://huggingface.co/stabilityai/stable-diffusion-xl-base-1.0/resolve/main/sd_xl_base_1.0.safetensors
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
COPY --from=downloader /comfyui/models /comfyui/models
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "main.py"]
