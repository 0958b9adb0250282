# KoboldCpp's release binary given a GGUF by URL: it downloads the file at every start
# (HF_HUB_OFFLINE does not stop a plain URL)
FROM debian:12.8-slim@sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3
COPY koboldcpp-linux-x64-cuda1210 /opt/koboldcpp/
ENV HF_HUB_OFFLINE=1
USER 10001
EXPOSE 5001
HEALTHCHECK CMD curl -fsS http://127.0.0.1:5001/api/v1/model || exit 1
# expect: startup-download
ENTRYPOINT ["/opt/koboldcpp/koboldcpp-linux-x64-cuda1210", "--model", "https://huggingface.co/acme/tiny-GGUF/resolve/main/tiny.Q4_K_M.gguf", "--port", "5001", "--host", "0.0.0.0"]
