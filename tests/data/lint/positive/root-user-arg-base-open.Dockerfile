# The final base is a build argument with no value and the stage sets no USER: the user
# the image runs as is left open by the build argument (a warning beside arg-unresolved).
ARG BASE_IMAGE
# expect: arg-unresolved
# expect: root-user warning
FROM ${BASE_IMAGE}
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
