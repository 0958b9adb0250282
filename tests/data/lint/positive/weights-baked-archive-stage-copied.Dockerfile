# A TorchServe archive packed in a builder stage and copied into the final image is one
# finding, at the RUN that packs it (its message names the COPY --from that brings it in),
# not a second one at that COPY. A weight file copied from a stage where servelab saw nothing
# made, or from outside the folder the RUN wrote, stays reported at its COPY --from.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS archive
WORKDIR /build
# expect: weights-baked
RUN torch-model-archiver --model-name resnet --version 1.0 --serialized-file /build/resnet.pt \
        --handler image_classifier --export-path model-store

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS tools
RUN mkdir -p /opt/enc

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
WORKDIR /srv
COPY --from=archive /build/model-store/resnet.mar /srv/model-store/
# expect: weights-baked
COPY --from=archive /opt/extra/adapter.safetensors /srv/models/
# expect: weights-baked
COPY --from=tools /opt/enc/encoder.safetensors /srv/models/
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8080/ping || exit 1
CMD ["torchserve", "--start", "--foreground", "--model-store", "/srv/model-store", "--models", "resnet.mar"]
