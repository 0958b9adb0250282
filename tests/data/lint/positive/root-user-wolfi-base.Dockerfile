# Chainguard's wolfi-base (and chainguard-base) are shells that run as root, unlike the
# other cgr.dev/chainguard images: without --resolve-base the user is unknown (warning)
# expect: root-user warning
FROM cgr.dev/chainguard/wolfi-base:20241203@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
HEALTHCHECK CMD ["wget", "-q", "-O-", "http://127.0.0.1:8080/health"]
CMD ["busybox", "httpd", "-f", "-p", "8080"]
