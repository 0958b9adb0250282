# negative: startup-download, no-health
# KoboldCpp pointed at a GGUF on a mounted volume, with its readiness check
FROM debian:12.8-slim@sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3
COPY koboldcpp /usr/local/bin/koboldcpp
USER 10001
EXPOSE 5001
HEALTHCHECK CMD curl -fsS http://127.0.0.1:5001/api/v1/model || exit 1
ENTRYPOINT ["koboldcpp", "--model", "/models/tiny.Q4_K_M.gguf", "--port", "5001", "--host", "127.0.0.1"]
