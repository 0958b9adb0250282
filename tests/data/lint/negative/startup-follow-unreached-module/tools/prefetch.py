from huggingface_hub import snapshot_download

snapshot_download("mistralai/Mistral-7B-Instruct-v0.3", local_dir="/models/current")
