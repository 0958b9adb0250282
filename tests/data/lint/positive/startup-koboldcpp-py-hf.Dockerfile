# python koboldcpp.py with --hf org/name: the GGUF repository is fetched at start; and no
# HEALTHCHECK on what is a server (KoboldCpp's /api/v1/model would do)
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
WORKDIR /srv/kcpp
COPY koboldcpp.py koboldcpp_default.so ./
USER 10001
# expect: no-health@3
# expect: startup-download
CMD python3 koboldcpp.py --hf acme/tiny-GGUF --contextsize 4096 --quiet
