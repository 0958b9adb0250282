#!/bin/bash
# healthy when the API answers /api/ping on the port the server listens on
code=$(curl --write-out '%{http_code}' --silent --output /dev/null "http://localhost:${SERVER_PORT:-3001}/api/ping")
if [ "$code" -eq 200 ]; then
  exit 0
fi
exit 1
