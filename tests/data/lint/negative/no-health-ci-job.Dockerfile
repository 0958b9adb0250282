# negative: no-health
# A CI image that runs the test suite and exits, and a bare shell entrypoint.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS ci
USER 10001
CMD ["pytest", "-x", "tests/"]

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
ENTRYPOINT ["/bin/bash"]
