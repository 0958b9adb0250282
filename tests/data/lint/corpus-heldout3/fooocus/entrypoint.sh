#!/bin/bash
# Keep models and outputs on the data volume: the image's own models folder is only a seed.
APPDIR=/content/app
DATADIR="${DATADIR:-/content/data}"

link_to_data() {
    mkdir -p "$DATADIR/$1"
    ln -s "$DATADIR/$1" "$APPDIR"
}

cd "$APPDIR" || exit 1

link_to_data models
(cd "$APPDIR/models.org" && cp -Rpn . "$APPDIR/models/")
if [ -d /import/models ]; then
    (cd /import/models && cp -Rpn . "$DATADIR/models/")
fi

link_to_data outputs

exec python launch.py "$@"
