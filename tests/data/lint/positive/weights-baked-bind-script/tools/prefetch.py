import argparse

from huggingface_hub import hf_hub_download

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
args = p.parse_args()
for name in ("config.json", "model.safetensors"):
    hf_hub_download("BAAI/bge-small-en-v1.5", name, local_dir=args.out)
