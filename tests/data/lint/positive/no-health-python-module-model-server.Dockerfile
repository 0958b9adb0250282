# An application module the build context lacks, run by python -m in an image that holds a
# model server's package (KFServing): a server, though its code is not there to show it
# expect: no-health
FROM python:3.8.20-slim@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN pip install --no-cache-dir "kfserving==0.6.1"
WORKDIR /workspace
USER 10001
ENTRYPOINT ["python", "-m", "InferenceModel"]
