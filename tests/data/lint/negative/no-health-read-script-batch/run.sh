#!/bin/sh
set -eu
python -m reports.build --input /data/in --output /data/out
