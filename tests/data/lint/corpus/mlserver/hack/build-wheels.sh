#!/usr/bin/env bash
# Builds a wheel of mlserver and of every runtime under runtimes/ into the folder given.
set -Eeuo pipefail

_out=${1:?usage: build-wheels.sh OUTPUT_DIR}
mkdir -p "$_out"

_build() {
  local _pkg_dir=$1
  echo "building wheel for ${_pkg_dir}"
  (cd "$_pkg_dir" && poetry build --format wheel --output "$_out")
}

_build .
for _runtime in ./runtimes/*; do
  [ -f "$_runtime/pyproject.toml" ] && _build "$_runtime"
done
