#!/bin/bash
__dirname=$(cd "$(dirname "$0")"; pwd -P)
cd "${__dirname}/.."

echo "LibreTranslate v$(cat VERSION)"
echo "Booting..."
touch /tmp/booting.flag

# First pass: libretranslate checks the installed language models (and fetches them when
# fewer than two are installed), then exits because LT_POWERCYCLE is set.
LT_POWERCYCLE=1 ./venv/bin/libretranslate "$@"

rm -f /tmp/booting.flag

eval $(./venv/bin/python ./scripts/print_args_env.py "$@")
BIND_ADDR="${LT_HOST:-0.0.0.0}"
if [[ $BIND_ADDR == "127.0.0.1" ]]; then
    BIND_ADDR="0.0.0.0"
fi

# Workers must not update the models again
unset LT_UPDATE_MODELS

exec ./venv/bin/gunicorn -c scripts/gunicorn_conf.py --workers ${LT_THREADS:-4} --max-requests 250 --timeout 2400 --bind $BIND_ADDR:${LT_PORT:-5000} 'wsgi:app()'
