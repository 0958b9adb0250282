#!/bin/bash -e
echo 'Starting Aphrodite Engine API server...'
CMD="python3 -m aphrodite.endpoints.openai.api_server
             --host 0.0.0.0
             --port 2242
             --download-dir ${HF_HOME:?}/hub
             ${MODEL_NAME:+--model $MODEL_NAME}
             ${REVISION:+--revision $REVISION}
             ${DATATYPE:+--dtype $DATATYPE}
             ${NUM_GPUS:+--tensor-parallel-size $NUM_GPUS}
             ${CMD_ADDITIONAL_ARGUMENTS}"
umask 002
set -x
exec $CMD
