# The image word is on the line after a continuation.
# expect: base-unpinned@5
FROM \
    --platform=linux/amd64 \
    registry.example:5000/team/app-base:2.1 \
    AS base
RUN true
