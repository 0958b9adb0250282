#!/bin/bash
export PYTHONPATH="${PYTHONPATH}:/app/src/"
export CUDA_HOME=${MARQO_CUDA_PATH:-/usr/local/cuda}
export LD_LIBRARY_PATH=${CUDA_HOME}/lib64

trap "bash /app/scripts/shutdown.sh; exit" SIGTERM SIGINT

if [ -z "$VESPA_QUERY_URL" ] && [ -z "$VESPA_DOCUMENT_URL" ] && [ -z "$VESPA_CONFIG_URL" ]; then
  echo "External vector store not configured. Using local vector store"
  chown -R vespa:vespa /opt/vespa/var/
  tmux new-session -d -s vespa "bash /usr/local/bin/start_vespa.sh"

  # deploy the application package if the config server has none yet
  until curl -s -X GET "http://localhost:19071/application/v2/tenant/default/application/default" | grep -q -e '"generation":' -e NOT_FOUND; do
    sleep 5
  done
  vespa deploy /app/scripts/vespa_local --wait 300 >/dev/null 2>&1
  until curl -f -X GET http://localhost:8080 >/dev/null 2>&1; do
    echo "  Waiting for vector store to be available..."
    sleep 10
  done

  export VESPA_QUERY_URL="http://localhost:8080"
  export VESPA_DOCUMENT_URL="http://localhost:8080"
  export VESPA_CONFIG_URL="http://localhost:19071"
  export ZOOKEEPER_HOSTS="localhost:2181"
fi

if [ "$MARQO_ENABLE_THROTTLING" != "FALSE" ]; then
    redis-server /etc/redis/redis.conf &
fi

export MARQO_LOG_LEVEL=${MARQO_LOG_LEVEL:-info}

# the API runs on_start() at import: bootstrap Vespa, then preload MARQO_MODELS_TO_PRELOAD
cd /app/src/marqo/tensor_search || exit
uvicorn api:app --host 0.0.0.0 --port 8882 --timeout-keep-alive 75 --log-level $MARQO_LOG_LEVEL &
export api_pid=$!
wait "$api_pid"

exit $?
