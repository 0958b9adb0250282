# negative: weights-baked
# A COPY heredoc whose terminator is not quoted is written with ARG values substituted
# (BuildKit's ExpandRaw): the script's ${FILE:-model.safetensors} is config.json by the
# time it runs, so it fetches a config, not weights.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG FILE=config.json
COPY --chown=10001:10001 --chmod=755 <<EOT /opt/fetch.sh
#!/bin/sh
FILE=${FILE:-model.safetensors}
curl -fsSL -o "/srv/$FILE" "https://example.com/org/$FILE"
EOT
RUN /opt/fetch.sh
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
