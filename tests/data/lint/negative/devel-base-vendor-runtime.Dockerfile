# negative: devel-base
# ROCm's development image and Intel's oneAPI Base Toolkit used only in builder stages; the
# final image is built on the oneAPI runtime, whose tags say devel as all of Intel's do.
FROM rocm/dev-ubuntu-22.04:6.2@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS rocm-build
RUN echo build > /out
FROM intel/oneapi-basekit:2024.2.1-0-devel-ubuntu22.04@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 AS sycl-build
RUN echo build > /out
FROM intel/oneapi-runtime:2024.2.1-0-devel-ubuntu22.04@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
COPY --from=rocm-build /out /opt/rocm.out
COPY --from=sycl-build /out /opt/sycl.out
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python3", "-m", "server"]
