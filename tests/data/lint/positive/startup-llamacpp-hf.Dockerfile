# llama.cpp's -hf downloads a GGUF from the hub at start (a quant after the colon)
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
# expect: startup-download
ENTRYPOINT ["/app/llama-server", "-hf", "ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", "--port", "8000"]
