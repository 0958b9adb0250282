# negative: download-unverified
# Downloads checked before use (the pattern the fix asks for), in one RUN and in the next.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG SCCACHE_VERSION=0.8.1
ARG SCCACHE_SHA256=0000000000000000000000000000000000000000000000000000000000000000
RUN curl -fsSL -o /tmp/sccache.tar.gz https://github.com/mozilla/sccache/releases/download/v${SCCACHE_VERSION}/sccache-v${SCCACHE_VERSION}-x86_64-unknown-linux-musl.tar.gz \
    && echo "${SCCACHE_SHA256}  /tmp/sccache.tar.gz" | sha256sum -c - \
    && tar -xzf /tmp/sccache.tar.gz -C /opt
# a signature checked with a key named by its fingerprint (the python/node official images'
# pattern): the signature may come from the same host, the key may not
ENV GPG_KEY=7169605F62C751356D054A26A821E680E5FA6305
RUN curl -fsSL -o /tmp/install.sh https://astral.sh/uv/0.5.1/install.sh \
    && curl -fsSL -o /tmp/install.sh.sig https://astral.sh/uv/0.5.1/install.sh.sig \
    && GNUPGHOME="$(mktemp -d)" && export GNUPGHOME \
    && gpg --batch --keyserver hkps://keys.openpgp.org --recv-keys "$GPG_KEY" \
    && gpg --batch --verify /tmp/install.sh.sig /tmp/install.sh && sh /tmp/install.sh
ADD --checksum=sha256:0000000000000000000000000000000000000000000000000000000000000000 https://bootstrap.pypa.io/get-pip.py /tmp/get-pip.py
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
