# stable-* tags move with each release of the distribution (debian:stable-slim)
# expect: base-latest
FROM debian:stable-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK CMD ["true"]
CMD ["sleep", "infinity"]
