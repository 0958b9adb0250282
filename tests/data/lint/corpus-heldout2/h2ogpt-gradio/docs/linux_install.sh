#!/bin/bash
set -o pipefail
set -ex
pip install -r requirements.txt -c reqs_optional/reqs_constraints.txt
# prebuilt CUDA wheels from the projects' GitHub releases
pip install https://github.com/abetlen/llama-cpp-python/releases/download/v0.2.26-cu121/llama_cpp_python-0.2.26-cp310-cp310-manylinux_2_31_x86_64.whl
pip install https://github.com/jllllll/exllama/releases/download/0.0.18/exllama-0.0.18+cu121-cp310-cp310-linux_x86_64.whl --no-cache-dir
