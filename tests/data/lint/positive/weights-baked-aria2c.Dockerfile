# aria2c, a segmented downloader, fetches model files as wget and curl do (a fresh-set form):
# a GGUF by its URL, a hub file saved under a weight name, and an installer run unchecked
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: weights-baked
RUN aria2c -x 16 -s 16 https://huggingface.co/TheBloke/Llama-2-7B-GGUF/resolve/main/llama-2-7b.Q4_K_M.gguf -d /models -o model.gguf
# expect: weights-baked
RUN aria2c --console-log-level=error -c -x 8 "https://example.com/files/4f2a" --dir=/opt/ckpt --out=model.safetensors
# expect: download-unverified
RUN aria2c -x 4 -o /tmp/miniforge.sh https://github.com/conda-forge/miniforge/releases/download/24.3.0-0/Miniforge3-Linux-x86_64.sh && bash /tmp/miniforge.sh -b -p /opt/conda
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
