#!/bin/bash
# optional overrides
[ -f speech.env ] && . speech.env

echo "The first start may download about 2 GB of voices and models."

# tts-1: piper voices; tts-1-hd: the XTTS model named in PRELOAD_MODEL, if any
bash download_voices_tts-1.sh
bash download_voices_tts-1-hd.sh $PRELOAD_MODEL

exec python speech.py ${PRELOAD_MODEL:+--preload $PRELOAD_MODEL} $EXTRA_ARGS "$@"
