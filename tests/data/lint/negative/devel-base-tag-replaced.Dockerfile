# negative: devel-base, base-unpinned
ARG TAG=12.4.1-cudnn-devel-ubuntu22.04
# ${TAG/devel/runtime} is BuildKit's replace operator: the final base is the runtime image.
FROM nvidia/cuda:${TAG/devel/runtime}@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
