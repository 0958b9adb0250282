#!/usr/bin/env bash
# Pull the image and serve a local checkpoint through openai_api.py on $PORT.
IMAGE_NAME=qwenllm/qwen:cu121
QWEN_CHECKPOINT_PATH=/path/to/Qwen-Chat
PORT=8000
docker run --gpus all -d --restart always --name qwen -p ${PORT}:80 \
    --mount type=bind,source=${QWEN_CHECKPOINT_PATH},target=/data/shared/Qwen/Qwen-Chat \
    ${IMAGE_NAME} \
    python openai_api.py --server-port 80 --server-name 0.0.0.0 -c /data/shared/Qwen/Qwen-Chat/
