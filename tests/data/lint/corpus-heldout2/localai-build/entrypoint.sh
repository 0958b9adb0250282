#!/bin/bash
set -e
cd /
if [ -n "$REBUILD" ] && [ "$REBUILD" != "false" ]; then
  echo "rebuilding is not supported in this image" >&2
fi
exec ./local-ai "$@"
