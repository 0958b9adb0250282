# A llamafile is llama.cpp's server with the GGUF weights inside: copied in, the model is baked
FROM debian:12.8-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
WORKDIR /bin
# expect: weights-baked
COPY build/*.llamafile ./model
USER 10001
EXPOSE 8080
HEALTHCHECK CMD ["/bin/sh", "-c", "true"]
ENTRYPOINT ["/bin/sh", "/bin/model", "--server", "--host", "0.0.0.0", "--nobrowser"]
