# negative: root-user
# Bases documented to run as non-root need no USER of their own (distroless :nonroot,
# UBI language images run as 1001); without --resolve-base servelab knows these by name.
FROM 127.0.0.1:5000/distroless/python3-debian12:nonroot@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS distroless
COPY app.py /app/app.py

FROM registry.access.redhat.com/ubi9/python-311:1-77@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=distroless /app/app.py /opt/app-root/src/app.py
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8080/health || exit 1
CMD ["python", "/opt/app-root/src/app.py", "--port", "8080"]
