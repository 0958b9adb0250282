FROM alpine:٣.١٨
USER ²
COPY --from=² a b
