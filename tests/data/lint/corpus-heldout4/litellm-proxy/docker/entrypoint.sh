#!/bin/bash
# development entrypoint: apply the prisma schema, then start the proxy
prisma db push --schema ./schema.prisma --accept-data-loss
exec litellm "$@"
