#!/bin/bash
# Without STORAGE_DIR the workspace data lives in the container layer and is lost on restart.
if [ -z "$STORAGE_DIR" ]; then
    echo "WARNING: STORAGE_DIR is not set; data will not survive a restart."
fi

{
  cd /app/server/ &&
    export CHECKPOINT_DISABLE=1 &&
    npx prisma generate --schema=./prisma/schema.prisma &&
    npx prisma migrate deploy --schema=./prisma/schema.prisma &&
    node /app/server/index.js
} &
{ node /app/collector/index.js; } &
wait -n
exit $?
