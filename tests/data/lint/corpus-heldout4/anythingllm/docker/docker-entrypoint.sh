#!/bin/bash
# Starts the API server and the document collector; exits when either stops.
[ -n "$STORAGE_DIR" ] || echo "WARNING: STORAGE_DIR is not set; workspaces will not survive a restart."

(
  cd /app/server/ || exit 1
  export CHECKPOINT_DISABLE=1   # no Prisma telemetry
  npx prisma generate --schema=./prisma/schema.prisma &&
    npx prisma migrate deploy --schema=./prisma/schema.prisma &&
    node /app/server/index.js
) &
node /app/collector/index.js &

wait -n
exit $?
