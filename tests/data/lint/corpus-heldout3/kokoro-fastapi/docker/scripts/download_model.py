#!/usr/bin/env python3
"""Fetch the Kokoro v1.0 weights and config from the project's GitHub release."""
import argparse
import json
import os
from urllib.request import urlretrieve

RELEASE = "https://github.com/remsky/Kokoro-FastAPI/releases/download/v0.1.4"


def files_ok(model_path: str, config_path: str) -> bool:
    if not (os.path.exists(model_path) and os.path.exists(config_path)):
        return False
    try:
        with open(config_path) as f:
            json.load(f)
    except ValueError:
        return False
    return os.path.getsize(model_path) > 0


def download_model(output_dir: str) -> None:
    os.makedirs(output_dir, exist_ok=True)
    model_path = os.path.join(output_dir, "kokoro-v1_0.pth")
    config_path = os.path.join(output_dir, "config.json")
    if files_ok(model_path, config_path):
        print("model files already present")
        return
    urlretrieve(f"{RELEASE}/kokoro-v1_0.pth", model_path)
    urlretrieve(f"{RELEASE}/config.json", config_path)
    if not files_ok(model_path, config_path):
        raise RuntimeError("downloaded files failed verification")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Download the Kokoro v1.0 model")
    parser.add_argument("--output", required=True)
    download_model(parser.parse_args().output)
