#!/bin/sh
set -eu
huggingface-cli download "$MODEL_ID" --local-dir /work/hf
python3 /app/tensorrt_llm/examples/llama/convert_checkpoint.py --model_dir /work/hf --output_dir /work/ckpt
trtllm-build --checkpoint_dir /work/ckpt --output_dir /work/engine
