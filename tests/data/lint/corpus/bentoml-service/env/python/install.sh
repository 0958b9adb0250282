#!/usr/bin/env bash
set -exuo pipefail
pip3 install --no-cache-dir -r ./env/python/requirements.lock.txt
