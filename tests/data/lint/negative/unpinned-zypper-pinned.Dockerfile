# negative: unpinned-packages
# zypper installs pinned by version (name=version, name>=version, an rpm edition)
FROM opensuse/leap:15.6@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
RUN zypper -n install --no-recommends python311=3.11.10-150600.3.9.1 "gcc14>=14.2" libgomp1-14.2.0+git10526-150000.1.6.1 && zypper clean --all
USER 10001
HEALTHCHECK CMD ["true"]
CMD ["python3.11", "-m", "http.server"]
