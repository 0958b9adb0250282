# negative: unpinned-packages
# Pinned dnf/microdnf (name-version), package groups, local rpms, conda name=version (also
# through an ARG), an environment file conda reads, and pipx/uv tool pins.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG PYTHON_VERSION=3.11
RUN microdnf install -y python3.11-3.11.7 shadow-utils-4.9-8.el9 && dnf install -y @development ./vendor/cudnn.rpm
RUN conda install -y -c conda-forge "python=${PYTHON_VERSION}" numpy=1.26.4 "pytorch==2.3.1" \
    && conda env create -f environment.yml \
    && mamba install -y --file requirements.conda.txt
RUN pipx install poetry==1.8.3 && uv tool install ruff@0.6.9
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
