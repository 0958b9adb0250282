import os

import torch
from fastapi import FastAPI, Header, HTTPException
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response

import coqui_tts

os.environ["SUNO_OFFLOAD_CPU"] = "True"

from bark.generation import preload_models  # noqa: E402
from vocos import Vocos  # noqa: E402

app = FastAPI()
app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"])

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# fetched from the Hugging Face hub at import, i.e. at every start
vocos = Vocos.from_pretrained("charactr/vocos-encodec-24khz").to(DEVICE)

with torch.no_grad():
    # Bark's text/coarse/fine checkpoints come from ~/.cache/suno/bark_v0 (copied into the image)
    preload_models(text_use_gpu=True, coarse_use_gpu=True, fine_use_gpu=True, codec_use_gpu=True)


def validate_auth_token(auth_token: str) -> bool:
    valid = [t.strip() for t in os.getenv("AUTH_TOKEN", "").split(",")]
    return auth_token in valid


@app.post("/generate_audio_wav")
def generate_audio_wav(text_prompt: str, x_auth_token: str = Header(None)):
    if not validate_auth_token(x_auth_token):
        return HTTPException(status_code=401, detail="Invalid x_auth_token")
    return Response(content=b"", media_type="audio/wav")


@app.post("/xtts")
def xtts_wav(text: str, language: str = "en", x_auth_token: str = Header(None)):
    if not validate_auth_token(x_auth_token):
        return HTTPException(status_code=401, detail="Invalid x_auth_token")
    return Response(content=coqui_tts.tts_generation_xtts(text=text, language=language), media_type="audio/wav")
