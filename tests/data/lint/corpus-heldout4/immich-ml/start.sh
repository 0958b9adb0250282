#!/usr/bin/env sh
# mimalloc for the worker processes; settings come from MACHINE_LEARNING_* variables
export LD_PRELOAD="/usr/lib/$(arch)-linux-gnu/libmimalloc.so.2"
export LD_BIND_NOW=1

host="${MACHINE_LEARNING_HOST:-0.0.0.0}"
port="${MACHINE_LEARNING_PORT:-3003}"

exec gunicorn app.main:app \
	-k app.config.CustomUvicornWorker \
	-w "${MACHINE_LEARNING_WORKERS:-1}" \
	-t "${MACHINE_LEARNING_WORKER_TIMEOUT:-120}" \
	-b "$host:$port" \
	--log-config-json log_conf.json \
	--graceful-timeout 0
