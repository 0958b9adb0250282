# negative: no-health
# The image runs its base's program with new arguments (a llama.cpp server image plus a CMD
# of flags): the base's HEALTHCHECK is unknown without --resolve-base, so nothing is said.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
USER 10001
EXPOSE 8080
CMD ["-m", "/models/model.gguf", "--port", "8080", "--host", "0.0.0.0"]
