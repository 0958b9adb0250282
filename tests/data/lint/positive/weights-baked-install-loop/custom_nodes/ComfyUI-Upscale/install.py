from huggingface_hub import hf_hub_download

hf_hub_download(repo_id="ai-forever/Real-ESRGAN", filename="RealESRGAN_x4.pth",
                local_dir="models/upscale")
