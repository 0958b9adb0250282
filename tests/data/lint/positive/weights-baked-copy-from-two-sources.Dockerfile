# Two weight files in one COPY are one finding, naming both
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
ARG MODEL=llama-3.2-1b
ARG QUANT=q4_k_m
USER 10001
# expect: weights-baked
COPY ${MODEL}-${QUANT}.gguf /${MODEL}-${QUANT}.gguf /models/
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "-m", "server"]
