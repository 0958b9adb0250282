# syntax=docker/dockerfile:1
# A builder stage and a runtime stage, both by tag. The builder has a --platform flag.
# expect: base-unpinned@6
# expect: base-unpinned@11

FROM   --platform=$BUILDPLATFORM   127.0.0.1:5000/library/golang:1.22-bookworm   AS   build
WORKDIR /src
RUN echo building

# the runtime stage: keep this comment where it is
FROM 127.0.0.1:5000/servelab/python-base:bookworm AS runtime
COPY --from=build /src /app
FROM runtime
USER 10001
