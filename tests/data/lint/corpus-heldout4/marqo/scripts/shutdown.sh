#!/bin/bash
echo "Stopping Marqo..."
kill -SIGINT "$api_pid" 2>/dev/null
/opt/vespa/bin/vespa-stop-services
