# text-generation-inference's final stage: no EXPOSE, the launcher is the server.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
ENV HUGGINGFACE_HUB_CACHE=/data PORT=80
# expect: no-health@2
ENTRYPOINT ["text-generation-launcher"]
CMD ["--json-output"]
