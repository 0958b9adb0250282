# get-pip.py straight from the network, by ARG (vLLM's base stage) and by wget (SGLang's).
ARG PYTHON_VERSION=3.12
ARG GET_PIP_URL="https://bootstrap.pypa.io/get-pip.py"
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG PYTHON_VERSION
ARG GET_PIP_URL
# expect: download-unverified
# expect: unpinned-packages
RUN apt-get update -y \
    && apt-get install -y python${PYTHON_VERSION} python${PYTHON_VERSION}-venv \
    && curl -sS ${GET_PIP_URL} | python${PYTHON_VERSION} \
    && python3 --version && python3 -m pip --version
# expect: download-unverified
RUN wget https://bootstrap.pypa.io/get-pip.py && python3 get-pip.py
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
