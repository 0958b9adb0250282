# negative: weights-baked
# gradio's share-tunnel binary comes from cdn-media.huggingface.co: a tool, not weights (checked)
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN curl -fsSL -o /usr/local/bin/frpc https://cdn-media.huggingface.co/frpc-gradio-0.2/frpc_linux_amd64 && \
    echo "c791d1f047b41ff5885772fc4bf20b797c6059bbd82abb9e31de15e55d6a57c4  /usr/local/bin/frpc" | sha256sum -c - && \
    chmod +x /usr/local/bin/frpc
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "http.server", "8000"]
