# A COPY heredoc (with --chown) is written with ARG values substituted when its terminator
# is not quoted: the script the RUN runs fetches the ARG's weights URL.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG MODEL_URL=https://example.com/org/model.safetensors
COPY --chown=10001:10001 <<EOT /opt/fetch.sh
#!/bin/sh
curl -fsSL "$MODEL_URL" -o /srv/model.bin
EOT
# expect: weights-baked
RUN sh /opt/fetch.sh
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
