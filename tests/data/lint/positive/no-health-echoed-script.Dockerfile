# The start script is written by a RUN with echo, and what it runs is named for a service.
# expect: no-health
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv/ocr
RUN echo "python ocr_service.py --threads 4" > launch.sh && chmod +x launch.sh
USER 10001
CMD ["sh", "launch.sh"]
