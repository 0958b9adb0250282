#!/usr/bin/env bash
# Voices named with --voice (passed by the add-on or `docker run ... --voice en_US-lessac-medium`)
# are looked up in /data and fetched there on first use.
exec python3 -m wyoming_piper \
    --piper '/usr/share/piper/piper' \
    --uri 'tcp://0.0.0.0:10200' \
    --data-dir /data \
    --download-dir /data "$@"
