ARG FLAVOUR=runtime
ARG TAG=12.4.1-cudnn-${FLAVOUR}-ubuntu22.04
# ${TAG//runtime/devel} puts the devel image back (every match replaced).
# expect: devel-base
FROM nvidia/cuda:${TAG//runtime/devel}@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
