import os

import open_clip
import tensorflow_hub as tfhub
import timm
import torch
import torchvision
import whisper
from diffusers import StableDiffusionXLPipeline
from easynmt import EasyNMT
from faster_whisper import WhisperModel
from fastapi import FastAPI
from transformers import AutoModelForCausalLM

llm = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_PATH"])
stt = WhisperModel("/mnt/models/whisper-large-v3", local_files_only=True)
legacy = whisper.load_model("/mnt/models/whisper/base.pt")
translator = EasyNMT("/mnt/models/opus-mt")
backbone = timm.create_model("convnext_tiny", pretrained=False)
vision = torchvision.models.resnet50(weights=None)
hub = torch.hub.load("/opt/yolov5", "custom", path="/mnt/models/best.pt", source="local")
torch.hub.download_url_to_file("http://127.0.0.1:9000/vae.pth", "/tmp/vae.pth")
clip = open_clip.create_model_and_transforms("ViT-B-32", pretrained="/mnt/models/clip.pt")
sdxl = StableDiffusionXLPipeline.from_single_file("/mnt/models/sdxl.safetensors")
encoder = tfhub.KerasLayer("/mnt/models/encoder")
for name in ["/mnt/models/a", "/mnt/models/b"]:
    AutoModelForCausalLM.from_pretrained(name)

app = FastAPI()


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
