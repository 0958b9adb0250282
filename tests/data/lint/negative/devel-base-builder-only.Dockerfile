# negative: devel-base
FROM nvidia/cuda:12.4.1-devel-ubuntu22.04@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS build
RUN mkdir -p /out
FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2
COPY --from=build /out /opt/app
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
