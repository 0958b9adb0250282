#!/usr/bin/env python3
"""Fetch MODEL_NAME from the Hugging Face hub into ./models/model (run once, at build time)."""
import os
import sys

import nltk
from transformers import AutoConfig, AutoModel, AutoTokenizer

model_dir = "./models/model"
model_name = os.getenv("MODEL_NAME")
if not model_name:
    print("Fatal: MODEL_NAME is required (a Hugging Face model id)")
    sys.exit(1)

trust_remote_code = os.getenv("TRUST_REMOTE_CODE", "false") == "true"
onnx_runtime = os.getenv("ONNX_RUNTIME", "false") == "true"


def download_onnx_model() -> None:
    from optimum.onnxruntime import ORTModelForFeatureExtraction

    model = ORTModelForFeatureExtraction.from_pretrained(model_name, export=True)
    model.save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(model_name).save_pretrained(model_dir)


def download_model() -> None:
    config = AutoConfig.from_pretrained(model_name, trust_remote_code=trust_remote_code)
    print(f"Downloading {model_name} ({config.model_type}) from the hub")
    model = AutoModel.from_pretrained(model_name, trust_remote_code=trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(model_name, trust_remote_code=trust_remote_code)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    with open(f"{model_dir}/model_name", "w") as f:
        f.write(model_name)


if onnx_runtime:
    download_onnx_model()
else:
    download_model()

nltk.download("punkt", download_dir="./nltk_data")
