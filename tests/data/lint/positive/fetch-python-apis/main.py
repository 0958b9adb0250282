import os
import shutil
import urllib.request

import boto3
import gdown
import nltk
import ollama
import open_clip
import timm
import torch
import torchvision
import tensorflow_hub as tfhub
import whisper
from diffusers import StableDiffusionXLPipeline
from easynmt import EasyNMT
from faster_whisper import WhisperModel, download_model
from fastapi import FastAPI
from google.cloud import storage
from keras.utils import get_file
from transformers import AutoModelForCausalLM, pipeline

MODEL_ID = os.environ["MODEL_ID"]
llm = AutoModelForCausalLM.from_pretrained(MODEL_ID)  # fetch: model id from $MODEL_ID
asr = pipeline("automatic-speech-recognition", model=os.getenv("ASR_MODEL"))  # fetch
torch.hub.download_url_to_file("https://example.org/vae.pth", "/tmp/vae.pth")  # fetch
state = torch.hub.load_state_dict_from_url("https://example.org/head.pth")  # fetch
stt = WhisperModel("large-v3")  # fetch
download_model("small.en")  # fetch
legacy = whisper.load_model("base")  # fetch
translator = EasyNMT("opus-mt")  # fetch
nltk.download("punkt")  # fetch
gdown.download("https://drive.google.com/uc?id=1abc", "/tmp/lora.pt")  # fetch
urllib.request.urlretrieve("https://example.org/classes.txt", "/tmp/classes.txt")  # fetch
boto3.client("s3").download_file("acme-models", "ranker/model.onnx", "/tmp/r.onnx")  # fetch
storage.Client().bucket("acme").blob("tok.json").download_to_filename("/tmp/t.json")  # fetch
backbone = timm.create_model("convnext_tiny", pretrained=True)  # fetch
vision = torchvision.models.resnet50(weights="IMAGENET1K_V2")  # fetch
for name in ["acme/reranker-small", "acme/reranker-large"]:
    AutoModelForCausalLM.from_pretrained(name)  # fetch
ollama.pull("llama3.2:3b")  # fetch
clip = open_clip.create_model_and_transforms("ViT-B-32", pretrained="laion2b_s34b_b79k")  # fetch
labels = get_file("labels.txt", origin="https://example.org/labels.txt")  # fetch
sdxl = StableDiffusionXLPipeline.from_single_file("https://example.org/sdxl.safetensors")  # fetch
encoder = tfhub.KerasLayer("https://example.org/tfhub/encoder/1")  # fetch
with urllib.request.urlopen("https://example.org/labels.json") as r, open("/tmp/l", "wb") as f:
    shutil.copyfileobj(r, f)

app = FastAPI()


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
