# A source checkout of whatever the default branch holds, then built and installed
# (SGLang's "latest" path, DeepEP's fork checked out by a branch name).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1 AS build
ARG DEEPEP_BRANCH=gb200_blog_part_2
WORKDIR /sgl-workspace
# expect: download-unverified
RUN git clone --depth=1 https://github.com/sgl-project/sglang.git /sgl-workspace/sglang
RUN cd sglang && python3 -m pip install -e "python[all]"
# expect: download-unverified
RUN git clone https://github.com/fzyzcjy/DeepEP.git && \
    cd DeepEP && git checkout ${DEEPEP_BRANCH} && \
    pip install --no-build-isolation .

FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
COPY --from=build /usr/local/lib/python3.11 /usr/local/lib/python3.11
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
