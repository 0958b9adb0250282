# The base comes from an ARG whose default is a bare tag: reported, never rewritten.
# expect: base-unpinned@4
ARG BASE=127.0.0.1:5000/servelab/python-base:bookworm
FROM ${BASE}
