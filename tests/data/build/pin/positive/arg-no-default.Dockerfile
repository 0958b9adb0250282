# The base comes from an ARG without a default: a warning, not rewritten.
# expect: base-arg@4
ARG BASE_IMAGE
FROM $BASE_IMAGE
