#!/bin/bash
# Container start: install the llama.cpp bindings, start redis, then the API behind hypercorn.
set -x
source serge.env

wheel_index="https://abetlen.github.io/llama-cpp-python/whl/cpu/"
install_bindings="python -m pip install -v llama-cpp-python==$LLAMA_PYTHON_VERSION --only-binary=:all: --extra-index-url=$wheel_index"
echo "Installing llama-cpp-python with: $install_bindings"

if ! eval "$install_bindings"; then
	echo 'Failed to install llama-cpp-python'
	exit 1
fi

on_term() {
	echo "Received termination signal!"
	kill -TERM "$redis_pid" "$api_pid" 2>/dev/null
}
trap on_term TERM

redis-server /etc/redis/redis.conf &
redis_pid=$!

bind="--bind 0.0.0.0:8008"
if [ "$SERGE_ENABLE_IPV6" = true ]; then
	bind="$bind --bind [::]:8008"
fi

cd /usr/src/app/api || exit 1
hypercorn src.serge.main:app $bind &
api_pid=$!

wait $redis_pid $api_pid
