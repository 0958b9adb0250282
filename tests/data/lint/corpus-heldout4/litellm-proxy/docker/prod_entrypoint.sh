#!/bin/sh
# SEPARATE_HEALTH_APP=1: run the proxy and a small health app side by side under supervisord
if [ "$SEPARATE_HEALTH_APP" = "1" ]; then
    export LITELLM_ARGS="$@"
    exec supervisord -c /etc/supervisord.conf
fi

if [ "$USE_DDTRACE" = "true" ]; then
    exec ddtrace-run litellm "$@"
fi
exec litellm "$@"
