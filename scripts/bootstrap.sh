#!/usr/bin/env bash
# servelab set-up: everything the example job and the tests need, idempotent.
#
#   - a Python venv (.venv) with servelab and its dev/test tools (Trivy, hadolint, act), and
#     a wheelhouse of servelab's dependencies for the offline test of the action's install,
#     and a CPU torch (from a wheel on disk) for the torch-in-container smoke test
#   - a Docker engine whose buildx exports OCI with rewritten timestamps
#       * an engine that already answers is used as it is (nothing installed system-wide)
#       * otherwise (Debian 12 with no engine) docker.io + docker-buildx come from Debian 13,
#         pinned low, and a dockerd is started with its own config (containerd image store,
#         CDI on with a spec directory of its own for the synthetic-GPU smoke tests; a
#         dockerd this script started with an older config is restarted)
#   - a local OCI registry on 127.0.0.1:5000 (Debian's docker-registry)
#   - the same registry storage over TLS on 127.0.0.1:5443 (own CA), for the lazy-pull tests
#   - the example's base image, made locally (debootstrap), pushed to that registry;
#     its name@sha256 goes into examples/build-args.env (untracked)
#   - for the tests only (not when SERVELAB_SETUP_FOR=example, as scripts/example.sh sets): a
#     pinned Mermaid CLI (npm) with Debian's chromium, to check the Mermaid charts servelab writes
#
# Source it (". scripts/bootstrap.sh") to get PATH and DOCKER_HOST set, or run it.
set -euo pipefail

SERVELAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${SERVELAB_STATE:-/var/tmp/servelab-setup}"
REGISTRY_ADDR="${SERVELAB_REGISTRY:-127.0.0.1:5000}"
VENV="${SERVELAB_VENV:-$SERVELAB_ROOT/.venv}"
mkdir -p "$STATE"

log() { printf '[setup] %s\n' "$*" >&2; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    log "this step needs root ($1); run as root or provide a Docker engine yourself"; exit 3
  fi
}

setup_venv() {
  local py="${PYTHON:-python3}"
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating venv $VENV"
    "$py" -m venv "$VENV"
  fi
  local stamp="$VENV/.servelab-installed"
  if [ ! -f "$stamp" ] || [ "$SERVELAB_ROOT/pyproject.toml" -nt "$stamp" ]; then
    log "installing servelab and dev tools into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$SERVELAB_ROOT[dev]"
    touch "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}

# The wheels of the action's hash-pinned locks (requirements/action*.lock: servelab's
# dependencies with [tools], and its build requirements), checked by hash as the action installs
# them, so that the test of the action's install: "true" path installs with PIP_NO_INDEX and
# PIP_FIND_LINKS: set-up may reach the package registry, the tests never do.
setup_wheelhouse() {
  local dir="$STATE/wheelhouse"
  local stamp="$dir/.servelab-wheelhouse"
  local lock="$SERVELAB_ROOT/requirements/action.lock"
  local build_lock="$SERVELAB_ROOT/requirements/action-build.lock"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ] && [ "$stamp" -nt "$build_lock" ]; then return 0; fi
  log "collecting wheels for the offline install test into $dir"
  mkdir -p "$dir"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check -d "$dir" \
    --require-hashes --only-binary=:all: -r "$build_lock" -r "$lock"
  touch "$stamp"
}

# A CPU build of PyTorch for the base image's Python (3.11), installed into a folder the
# synthetic-GPU smoke test mounts into a container: the in-container probe then meets a real
# torch that cannot use CUDA. Only a wheel already on disk is used (this kind of machine keeps
# one in /opt/wheels; SERVELAB_TORCH_WHEEL names another), never a multi-GB download.
setup_torch_cpu() {
  local dir="$STATE/torch-cpu" wheel="${SERVELAB_TORCH_WHEEL:-}"
  [ -f "$dir/.servelab-torch" ] && return 0
  if [ -z "$wheel" ]; then
    wheel=$(ls /opt/wheels/torch-*+cpu-cp311-cp311-*x86_64.whl 2>/dev/null | head -1 || true)
  fi
  if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
    log "no CPU torch wheel for Python 3.11 on disk: the torch-in-container smoke test will skip"
    return 0
  fi
  log "installing $(basename "$wheel") into $dir (for the torch-in-container smoke test)"
  rm -rf "$dir"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile \
    --target "$dir" "$wheel"
  touch "$dir/.servelab-torch"
}

apt_install() {
  need_root "apt-get install $*"
  if [ ! -f "$STATE/apt-updated" ]; then
    apt-get update -qq >&2
    touch "$STATE/apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# SOCI lazy pulling (issue 25): soci-snapshotter 0.4.1 from trixie (`soci`,
# `soci-snapshotter-grpc`) and fuse3 (`fusermount3`), for the lazy-pull tests; the private
# containerd itself is Debian's `containerd`, installed with the engine. Without them the lazy
# arm is "not measured". Nothing to do (and no apt call) when all three are there.
setup_soci() {
  if command -v soci >/dev/null 2>&1 && command -v soci-snapshotter-grpc >/dev/null 2>&1 \
      && command -v fusermount3 >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    log "soci-snapshotter or fuse3 missing: the lazy-pull tests need them" \
        "(as root: apt-get install fuse3 && apt-get install -t trixie soci-snapshotter)"
    return 0
  fi
  command -v fusermount3 >/dev/null 2>&1 || apt_install fuse3
  if ! command -v soci >/dev/null 2>&1 || ! command -v soci-snapshotter-grpc >/dev/null 2>&1; then
    add_trixie_source
    apt_install -t trixie soci-snapshotter
  fi
}

# The lazy-pull tests' registry (issue 25): soci-snapshotter discovers an image's SOCI index
# (referrers API) only over HTTPS, so a second docker-registry serves the SAME storage as the
# plain one over TLS on $TLS_REGISTRY_ADDR, with its own access log; the certificate is for
# the IP 127.0.0.1 and for the name $TLS_REGISTRY_ALIAS (subjectAltName), signed by a CA made
# here ($STATE/tls/ca.pem), which the tests hand to soci and its snapshotter. The name: the
# snapshotter talks plain HTTP to any loopback address, so servelab maps that name to
# 127.0.0.1 inside its private mount namespace only (a hosts file bind-mounted there) and
# gives it to the snapshotter as the registry's mirror. Nothing is installed in the machine's
# trust store and /etc/hosts is not edited.
TLS_REGISTRY_ADDR="${SERVELAB_TLS_REGISTRY:-127.0.0.1:5443}"
TLS_DIR="$STATE/tls"
TLS_REGISTRY_ALIAS="servelab-lazy-registry.test"

tls_registry_answers() {
  [ -s "$TLS_DIR/ca.pem" ] && curl -fsS --max-time 3 --cacert "$TLS_DIR/ca.pem" \
    "https://$TLS_REGISTRY_ADDR/v2/" >/dev/null 2>&1
}

tls_certs_current() {
  [ -s "$TLS_DIR/cert.pem" ] && [ -s "$TLS_DIR/key.pem" ] && [ -s "$TLS_DIR/ca.pem" ] \
    && openssl x509 -in "$TLS_DIR/cert.pem" -noout -ext subjectAltName 2>/dev/null \
       | grep -q "DNS:$TLS_REGISTRY_ALIAS"
}

make_tls_certs() {
  tls_certs_current && return 0
  mkdir -p "$TLS_DIR"
  local ip="${TLS_REGISTRY_ADDR%:*}"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=servelab test CA" \
    -keyout "$TLS_DIR/ca-key.pem" -out "$TLS_DIR/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$ip" -keyout "$TLS_DIR/key.pem" \
    -out "$TLS_DIR/cert.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:%s,DNS:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
    "$ip" "$TLS_REGISTRY_ALIAS" > "$TLS_DIR/ext.cnf"
  openssl x509 -req -in "$TLS_DIR/cert.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca-key.pem" \
    -CAcreateserial -days 3650 -extfile "$TLS_DIR/ext.cnf" -out "$TLS_DIR/cert.pem" >/dev/null 2>&1
  rm -f "$TLS_DIR/cert.csr"
}

# docker-registry's config (on stdout) for the one storage both registries serve, at ADDR
registry_config() {
  cat <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STATE/registry-data
  delete:
    enabled: true
http:
  addr: $1
YML
}

setup_tls_registry() {
  if tls_registry_answers; then
    tls_certs_current && { log "TLS registry at $TLS_REGISTRY_ADDR answers"; return 0; }
    # an older certificate (without the mirror name): stop the registry this script started
    if [ -s "$STATE/registry-tls.pid" ]; then
      kill "$(cat "$STATE/registry-tls.pid")" 2>/dev/null || true
      sleep 1
    fi
  fi
  command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  make_tls_certs
  mkdir -p "$STATE/registry-data"
  registry_config "$TLS_REGISTRY_ADDR" > "$STATE/registry-tls.yml"
  cat >> "$STATE/registry-tls.yml" <<YML
  tls:
    certificate: $TLS_DIR/cert.pem
    key: $TLS_DIR/key.pem
YML
  log "starting the TLS docker-registry on $TLS_REGISTRY_ADDR (same storage)"
  setsid docker-registry serve "$STATE/registry-tls.yml" >>"$STATE/registry-tls.log" 2>&1 < /dev/null &
  echo $! > "$STATE/registry-tls.pid"
  for _ in $(seq 1 30); do tls_registry_answers && return 0; sleep 0.5; done
  log "TLS registry did not answer; see $STATE/registry-tls.log"; exit 3
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

buildx_present() { timeout 20 docker buildx version >/dev/null 2>&1; }

add_trixie_source() {
  [ -f /etc/apt/sources.list.d/servelab-trixie.sources ] && return 0
  local mirror
  mirror=$(grep -h -m1 -E '^URIs:.*debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1 || true)
  [ -n "$mirror" ] || mirror=$(grep -h -m1 -E '^deb .*debian/? ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
  log "adding Debian 13 (trixie) from $mirror, pinned low, for docker.io, docker-buildx and soci-snapshotter"
  cat > /etc/apt/sources.list.d/servelab-trixie.sources <<SRC
Types: deb
URIs: $mirror
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cat > /etc/apt/preferences.d/servelab-trixie <<PIN
Package: *
Pin: release n=trixie
Pin-Priority: 50
PIN
  rm -f "$STATE/apt-updated"
}

install_engine() {
  if [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/bin/docker ] || [ ! -e /usr/libexec/docker/cli-plugins/docker-buildx ]; then
    add_trixie_source
    need_root "install docker.io"
    [ -f "$STATE/apt-updated" ] || { apt-get update -qq >&2; touch "$STATE/apt-updated"; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -t trixie docker.io docker-cli docker-buildx >&2
  fi
}

# The config of servelab's own dockerd: the containerd image store, and CDI with a spec
# directory of its own, where the smoke tests put a synthetic nvidia.com/gpu device.
daemon_config() {
  printf '{"features": {"containerd-snapshotter": true, "cdi": true}, "cdi-spec-dirs": ["%s"]}\n' \
    "$STATE/cdi"
}

start_dockerd() {
  mkdir -p "$STATE/cdi"
  daemon_config > "$STATE/daemon.json"
  log "starting dockerd (containerd image store, CDI specs in $STATE/cdi)"
  setsid /usr/sbin/dockerd --config-file "$STATE/daemon.json" \
    --pidfile "$STATE/dockerd.pid" >"$STATE/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    engine_answers && return 0
    sleep 1
  done
  log "dockerd did not answer within 60 s; see $STATE/dockerd.log"; tail -20 "$STATE/dockerd.log" >&2; exit 3
}

# A dockerd this script started earlier with an older config is restarted with the current
# one (a dockerd it did not start is never touched).
refresh_own_dockerd() {
  local pid
  pid=$(cat "$STATE/dockerd.pid" 2>/dev/null) || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  grep -q "$STATE/daemon.json" "/proc/$pid/cmdline" 2>/dev/null || return 0
  [ "$(daemon_config)" = "$(cat "$STATE/daemon.json" 2>/dev/null)" ] && return 0
  log "restarting servelab's dockerd (pid $pid) with its current config"
  kill "$pid"
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  start_dockerd
}

setup_engine() {
  # Prefer the packaged client (it has the buildx plugin) over a bare client earlier on PATH.
  [ -x /usr/bin/docker ] && export PATH="/usr/bin:$PATH"
  refresh_own_dockerd
  if engine_answers && buildx_present; then
    log "using the Docker engine that already answers"
    return 0
  fi
  install_engine
  export PATH="/usr/bin:$PATH"
  engine_answers || start_dockerd
  buildx_present || { log "docker buildx missing after install"; exit 3; }
}

registry_answers() { curl -fsS --max-time 3 "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

setup_registry() {
  registry_answers && { log "registry at $REGISTRY_ADDR answers"; return 0; }
  command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry
  mkdir -p "$STATE/registry-data"
  registry_config "$REGISTRY_ADDR" > "$STATE/registry.yml"
  # Runs delete their manifests but a registry keeps the blobs until its garbage collection,
  # which must not run while it serves: do it now, while neither registry on the storage does
  # (blobs no manifest references; manifests are kept, tagged or not).
  if ! tls_registry_answers; then
    before=$(du -sm "$STATE/registry-data" 2>/dev/null | cut -f1)
    docker-registry garbage-collect "$STATE/registry.yml" >"$STATE/registry-gc.log" 2>&1 \
      || log "registry garbage collection failed; see $STATE/registry-gc.log"
    after=$(du -sm "$STATE/registry-data" 2>/dev/null | cut -f1)
    log "registry storage garbage-collected: ${before:-?} MB -> ${after:-?} MB"
  fi
  log "starting docker-registry on $REGISTRY_ADDR"
  setsid docker-registry serve "$STATE/registry.yml" >"$STATE/registry.log" 2>&1 < /dev/null &
  echo $! > "$STATE/registry.pid"
  for _ in $(seq 1 30); do registry_answers && return 0; sleep 0.5; done
  log "registry did not answer; see $STATE/registry.log"; exit 3
}

BASE_REPO="$REGISTRY_ADDR/servelab/python-base"
BASE_TAG="bookworm"

make_base_rootfs() {
  local tarball="$STATE/python-base-rootfs.tar"
  [ -s "$tarball" ] && return 0
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  local mirror
  mirror=$(grep -h -m1 -E '^URIs:.*debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1 || true)
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
  local dir="$STATE/rootfs"
  rm -rf "$dir"
  log "debootstrap bookworm (minbase) + python3 into $dir"
  debootstrap --variant=minbase --include=python3-minimal,python3 bookworm "$dir" "$mirror" >"$STATE/debootstrap.log" 2>&1 \
    || { tail -20 "$STATE/debootstrap.log" >&2; exit 3; }
  rm -rf "$dir/var/cache/apt/archives"/*.deb "$dir/var/lib/apt/lists"/*
  tar -C "$dir" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$dir"
}

base_digest() {
  # The registry's digest of the base image's tag (a manifest HEAD).
  curl -fsS --max-time 5 -o /dev/null -I -D - \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://$REGISTRY_ADDR/v2/servelab/python-base/manifests/$BASE_TAG" 2>/dev/null \
    | tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest"{print $2}'
}

setup_base_image() {
  local args_file="$SERVELAB_ROOT/examples/build-args.env"
  local digest=""
  digest=$(base_digest) || true
  if [ -z "$digest" ]; then
    make_base_rootfs
    log "importing and pushing $BASE_REPO:$BASE_TAG"
    docker import "$STATE/python-base-rootfs.tar" "$BASE_REPO:$BASE_TAG" >/dev/null
    docker push -q "$BASE_REPO:$BASE_TAG" >/dev/null
    digest=$(base_digest)
  fi
  [ -n "$digest" ] || { log "could not read the base image digest from the registry"; exit 3; }
  local want="BASE_IMAGE=$BASE_REPO:$BASE_TAG@$digest"
  if [ ! -f "$args_file" ] || ! grep -qxF "$want" "$args_file"; then
    printf '# written by scripts/bootstrap.sh: the locally made base image, pinned by digest\n%s\n' "$want" > "$args_file"
  fi
  log "base image: $BASE_REPO:$BASE_TAG@$digest"
}

SARIF_NPM="@microsoft/jest-sarif@1.0.0-beta.0"

setup_sarif_schema() {
  # The tests validate SARIF output against the OASIS SARIF 2.1.0 schema, which Microsoft's
  # jest-sarif package ships (lib/schemas/sarif-2.1.0-rtm.5.json): fetched from the npm
  # registry at set-up, never committed.
  local dest="$SERVELAB_ROOT/tests/data/sarif-2.1.0.schema.json"
  [ -s "$dest" ] && return 0
  command -v npm >/dev/null 2>&1 || apt_install npm
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$SARIF_NPM" >/dev/null 2>&1) \
    || { log "npm pack $SARIF_NPM failed"; rm -rf "$tmp"; exit 3; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/schemas/sarif-2.1.0-rtm.5.json
  cp "$tmp/package/lib/schemas/sarif-2.1.0-rtm.5.json" "$dest.tmp" && mv "$dest.tmp" "$dest"
  rm -rf "$tmp"
  log "SARIF 2.1.0 schema from npm $SARIF_NPM"
}

# The tests check every Mermaid chart servelab writes (servelab history's xychart-beta) with a
# pinned Mermaid: npm's mermaid-cli in a folder of the state dir, driven by Debian's chromium
# (PUPPETEER_SKIP_DOWNLOAD=1: puppeteer never downloads a browser). mermaid-cli 11.x is the
# last line that runs on Debian's Node 20 (12.x needs Node 22). Fast when already installed.
MERMAID_CLI_VERSION="11.12.0"
MERMAID_VERSION="11.12.0"
PUPPETEER_VERSION="23.11.1"

setup_mermaid_cli() {
  local dir="$STATE/mermaid-cli"
  local want="mermaid-cli $MERMAID_CLI_VERSION mermaid $MERMAID_VERSION puppeteer $PUPPETEER_VERSION"
  if [ -x "$dir/node_modules/.bin/mmdc" ] && [ -x /usr/bin/chromium ] \
     && [ "$(cat "$dir/.servelab-mermaid" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  if [ "$(id -u)" != 0 ] && ! [ -x /usr/bin/chromium ]; then
    log "chromium missing (apt-get install chromium): the Mermaid chart check will skip"; return 0
  fi
  [ -x /usr/bin/chromium ] || apt_install chromium
  command -v npm >/dev/null 2>&1 || apt_install npm
  log "installing the Mermaid CLI ($want) into $dir"
  mkdir -p "$dir"
  cat > "$dir/package.json" <<JSON
{"name": "servelab-mermaid-check", "private": true,
 "dependencies": {"@mermaid-js/mermaid-cli": "$MERMAID_CLI_VERSION",
                  "mermaid": "$MERMAID_VERSION", "puppeteer": "$PUPPETEER_VERSION"}}
JSON
  # --no-sandbox: chromium refuses to start as root with its sandbox on
  cat > "$dir/puppeteer.json" <<JSON
{"executablePath": "/usr/bin/chromium", "args": ["--no-sandbox", "--disable-gpu"]}
JSON
  (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --silent --no-audit --no-fund \
      --save-exact >/dev/null 2>&1) || { log "npm install of the Mermaid CLI failed"; exit 3; }
  printf '%s' "$want" > "$dir/.servelab-mermaid"
}

setup_example_weights() {
  # The example's model weights: 8 MiB of deterministic, incompressible bytes (sha256 in counter
  # mode), made here rather than committed. The control bakes them into its image, the
  # treatment mounts them read-only: the size difference the example shows is theirs.
  local dest="$SERVELAB_ROOT/examples/model/weights.safetensors"
  [ -s "$dest" ] && return 0
  "$VENV/bin/python" - "$dest" <<'PY'
import hashlib, sys
from pathlib import Path
dest = Path(sys.argv[1])
tmp = dest.with_name(dest.name + ".tmp")
with tmp.open("wb") as f:
    for i in range(8 * 1024 * 1024 // 32):
        f.write(hashlib.sha256(b"servelab-example-%d" % i).digest())
tmp.replace(dest)
PY
  log "example model weights: $dest"
}

main() {
  command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
  # strace: the scan test that proves Trivy makes no connection in a loopback-only netns
  if ! command -v strace >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt_install strace; else log "strace missing: the no-traffic scan test needs it"; fi
  fi
  setup_venv
  setup_wheelhouse
  setup_torch_cpu
  setup_example_weights
  setup_sarif_schema
  [ "${SERVELAB_SETUP_FOR:-tests}" = example ] || setup_mermaid_cli
  setup_engine
  setup_registry
  setup_base_image
  setup_soci
  setup_tls_registry
}

# `scripts/bootstrap.sh only setup_tls_registry` runs one step (its prerequisites present).
if [ "${1:-}" = only ] && [ -n "${2:-}" ] && declare -F "$2" >/dev/null; then
  "$2"
elif [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
else
  main "$@"
fi
