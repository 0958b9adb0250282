#!/bin/sh
# wait for the sidecar on loopback, then serve
until curl -fsS http://127.0.0.1:9000/ready; do sleep 1; done
exec python -m server --model /models/m
