# conda / mamba / micromamba installs (text-generation-inference's PyTorch stage): pinned
# python and pytorch, unpinned the rest.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG PYTHON_VERSION=3.10
# expect: unpinned-packages
RUN /opt/conda/bin/conda install -c pytorch -c nvidia -y "python=${PYTHON_VERSION}" "pytorch=2.1.1" pytorch-cuda numpy
# expect: unpinned-packages
RUN micromamba create -y -n serve -c conda-forge python=3.11 "scipy>=1.11" && micromamba clean -a -y
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
