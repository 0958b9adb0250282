#!/bin/bash
pip install --no-cache-dir vllm==0.5.0
exec python -m server
