# conda's own update takes whatever is newest: the installer itself (`conda update conda`,
# here inside a case arm by platform) and every package (`--all`).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG TARGETPLATFORM
# expect: unpinned-packages
RUN case "${TARGETPLATFORM}" in \
      linux/arm64) echo "no arm build" && exit 1 ;; \
      *) /opt/miniforge/bin/conda update -n base -c conda-forge -y conda ;; \
    esac
# expect: unpinned-packages
RUN mamba update --all --yes && mamba clean --all --yes
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
