from huggingface_hub import hf_hub_download

for name in ("config.json", "model.safetensors", "tokenizer.json"):
    hf_hub_download("sentence-transformers/all-MiniLM-L6-v2", name, local_dir="/models/minilm")
