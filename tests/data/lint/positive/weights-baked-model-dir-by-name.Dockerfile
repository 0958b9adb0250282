# Without the build context, a folder named model/ copied to a model path is judged by its
# name (a warning that says so); one named model-store/ likewise, globbed.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /service
COPY service/ /service/service/
# expect: weights-baked warning
COPY ./model ./model
# expect: weights-baked warning
COPY model-store/* /home/server/model-store/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
