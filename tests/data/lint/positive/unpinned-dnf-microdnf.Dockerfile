# UBI / Rocky based serving images (vLLM's ubi stage, ollama's rh_linux_deps): dnf, yum
# and microdnf installs without -<version>.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: unpinned-packages
RUN microdnf install -y --nodocs python3.11 python3.11-pip shadow-utils && microdnf clean all
# expect: unpinned-packages
RUN dnf install -y --setopt=tsflags=nodocs gcc-toolset-13 cuda-toolkit-12-4 \
    && yum install -y git
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
