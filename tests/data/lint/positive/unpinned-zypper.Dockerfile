# openSUSE's zypper, global options before the command, install's options after it
FROM opensuse/leap:15.6@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
# expect: unpinned-packages
RUN zypper --non-interactive --gpg-auto-import-keys install --no-recommends --auto-agree-with-licenses python311 python311-pip gcc14 ffmpeg-8 && zypper clean --all
USER 10001
HEALTHCHECK CMD ["true"]
CMD ["python3.11", "-m", "http.server"]
