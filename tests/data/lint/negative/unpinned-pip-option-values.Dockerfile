# negative: unpinned-packages
# Option values are not package names: --root-user-action ignore, an index URL, a progress
# bar setting, and a requirement list given by a command substitution of pinned lines.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --root-user-action ignore --no-cache-dir torch==2.3.0
RUN pip install --root-user-action=ignore --index-url https://download.pytorch.org/whl/cpu torchvision==0.18.0
RUN pip install --progress-bar off --use-feature fast-deps numpy==1.26.4 $(echo "scipy==1.13.0")
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
