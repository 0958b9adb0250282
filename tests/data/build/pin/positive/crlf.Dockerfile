# CRLF line endings are kept.
# expect: base-unpinned@3
FROM 127.0.0.1:5000/servelab/python-base:bookworm
RUN true
