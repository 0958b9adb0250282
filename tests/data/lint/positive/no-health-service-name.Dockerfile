# No EXPOSE, but the start command runs a program named for a service.
# expect: no-health
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv/speech
COPY <<'PY' /srv/speech/speech_microservice.py
import sys

print("listening", file=sys.stderr)
PY
USER 10001
ENTRYPOINT ["python", "speech_microservice.py", "--workers", "2"]
