# ROCm's development image (named rocm/dev-*, not tagged -devel) as the final base.
# expect: devel-base
FROM rocm/dev-ubuntu-22.04:6.2@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python3", "-m", "server"]
