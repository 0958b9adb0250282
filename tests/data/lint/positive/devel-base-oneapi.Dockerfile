# Intel's oneAPI Base Toolkit (compilers and SDK) as the final base; the runtime image is
# intel/oneapi-runtime.
# expect: devel-base
FROM intel/oneapi-basekit:2024.2.1-0-ubuntu22.04@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS base
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python3", "-m", "server"]
