"""Writes default webui settings into /data/config/auto/config.json when there are none."""
import json
import os

path = "/data/config/auto/config.json"
if not os.path.exists(path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"outdir_samples": "/output"}, f)
