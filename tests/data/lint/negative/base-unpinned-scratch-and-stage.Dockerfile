# negative: base-unpinned, base-latest
# scratch and references to earlier stages are not images to pin.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
RUN mkdir -p /out
FROM build AS test
RUN true
FROM scratch
COPY --from=build /out /out
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
