# The start script is not in the build context, but the image was built to hold a server:
# a serving package installed, a server program copied from a builder stage.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
RUN mkdir -p /out && printf '#!/bin/sh\n' > /out/embed-router
# expect: no-health
# expect: startup-download@12 info
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "sglang==0.3.2"
COPY --from=build /out/embed-router /usr/local/bin/embed-router
COPY boot.sh /usr/local/bin/boot.sh
USER 10001
ENTRYPOINT ["/usr/local/bin/boot.sh"]
