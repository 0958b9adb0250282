#!/bin/bash
set -e
if [[ "$1" = "serve" ]]; then
    shift 1
    torchserve --start --ts-config /home/model-server/config.properties --disable-token-auth
else
    eval "$@"
fi
tail -f /dev/null
