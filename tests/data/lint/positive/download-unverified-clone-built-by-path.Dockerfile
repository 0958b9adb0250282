# A clone built by a path into it (cmake SRC -B SRC/build), not from inside it
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS builder
# expect: download-unverified
RUN git clone --depth 1 https://github.com/ggml-org/llama.cpp.git
RUN cmake llama.cpp -B llama.cpp/build -DGGML_CUDA=OFF \
    && cmake --build llama.cpp/build --config Release --target llama-server
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
COPY --from=builder /llama.cpp/build/bin/llama-server /usr/local/bin/llama-server
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["llama-server", "--model", "/models/model.gguf"]
