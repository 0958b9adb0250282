#!/bin/bash
set -e -o pipefail
# run the server as the unprivileged "invoke" user, matching the host's uid if asked
USER_ID=${CONTAINER_UID:-1000}
usermod -u "$USER_ID" invoke >/dev/null 2>&1 || true
mkdir -p "$INVOKEAI_ROOT"
chown --recursive invoke:invoke "$INVOKEAI_ROOT"
cd "$INVOKEAI_ROOT"
exec gosu invoke "$@"
