# negative: download-unverified
# The clone's script runs only after a 40-hex commit is checked out
FROM python:3.12.7-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
WORKDIR /content
RUN git clone https://github.com/camenduru/stable-diffusion-webui \
    && git -C stable-diffusion-webui checkout 0123456789abcdef0123456789abcdef01234567
RUN cd stable-diffusion-webui && python launch.py --skip-torch-cuda-test --exit
USER 10001
HEALTHCHECK CMD ["python", "-c", "print(1)"]
CMD ["python", "stable-diffusion-webui/webui.py", "--api"]
