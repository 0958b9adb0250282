# A static server binary on scratch with no USER runs as uid 0: no base to ask.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
RUN echo build
# expect: root-user error
FROM scratch
COPY --from=build /usr/local/bin/server /server
HEALTHCHECK --interval=5s CMD ["/server", "--health"]
EXPOSE 8080
ENTRYPOINT ["/server"]
