# A downloader stage sets HF_HOME and runs a script the build context lacks; the final
# stage copies that cache: the weights the script put there reach the image (a warning at
# the COPY --from: only where the folder is was judged)
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS fetch
ENV HF_HOME=/opt/hf-cache
COPY prefetch_models.py /srv/
# expect: weights-baked info
# expect: download-unverified info
RUN python /srv/prefetch_models.py
FROM python:3.11.10-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
# expect: weights-baked warning
COPY --from=fetch /opt/hf-cache /opt/hf-cache
ENV HF_HOME=/opt/hf-cache HF_HUB_OFFLINE=1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
