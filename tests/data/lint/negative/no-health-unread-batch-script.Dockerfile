# negative: no-health
# A start script the build context lacks, in an image that holds no server (pinned
# numerical packages only): nothing shows it serves, so no-health stays silent.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "numpy==2.1.1" "pandas==2.2.3"
USER 10001
ENTRYPOINT ["/usr/local/bin/nightly.sh"]
