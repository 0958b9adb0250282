# negative: startup-download
# --model names a file relative to the WORKDIR (TinyLLM's llama_cpp.server image), not a
# hub id: nothing is downloaded at start.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /app
ENV MODEL=models/llama-2-7b-chat.Q5_K_M.gguf
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD python3 -m llama_cpp.server --model $MODEL --model-path weights/llama --host 0.0.0.0 --port 8000
