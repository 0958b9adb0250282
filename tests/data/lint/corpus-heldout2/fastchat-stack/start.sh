#!/bin/sh
python3 -m fastchat.serve.controller --host 127.0.0.1 --port 21001 &
sleep 2
python3 -m fastchat.serve.model_worker \
    --model-path lmsys/vicuna-7b-v1.5 \
    --model-names "gpt-3.5-turbo" \
    --controller-address http://127.0.0.1:21001 \
    --worker-address http://127.0.0.1:21002 --port 21002 &
sleep 30
exec python3 -m fastchat.serve.openai_api_server --host 0.0.0.0 --port 8000 \
    --controller-address http://127.0.0.1:21001
