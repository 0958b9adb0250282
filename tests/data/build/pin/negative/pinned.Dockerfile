# Everything pinned, scratch, and a stage reference: nothing to do.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:0000000000000000000000000000000000000000000000000000000000000007 AS base
FROM scratch AS empty
FROM base
