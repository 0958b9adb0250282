#!/bin/bash
set -e
python /app/fetch_assets.py
exec python -m server --model /app/assets/embedder --port 8000
