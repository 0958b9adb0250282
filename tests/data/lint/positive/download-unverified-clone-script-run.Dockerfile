# A clone whose own script runs at build (launch.py, nvm.sh): the build runs what the tag holds
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
WORKDIR /content
# expect: download-unverified
RUN git clone -b v1.6 https://github.com/camenduru/stable-diffusion-webui
RUN cd stable-diffusion-webui && python launch.py --skip-torch-cuda-test --exit
ARG NVM_DIR=/opt/nvm
# expect: download-unverified
RUN git clone https://github.com/nvm-sh/nvm.git "$NVM_DIR"
RUN sh "$NVM_DIR/nvm.sh"
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "stable-diffusion-webui/webui.py", "--api"]
