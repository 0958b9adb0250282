import os

from fastapi import FastAPI

from xtts_api_server.tts_funcs import TTSWrapper

MODEL_FOLDER = os.getenv("MODEL", "models")
MODEL_SOURCE = os.getenv("MODEL_SOURCE", "local")
MODEL_VERSION = os.getenv("MODEL_VERSION", "v2.0.2")

XTTS = TTSWrapper(MODEL_FOLDER, MODEL_SOURCE, MODEL_VERSION, os.getenv("DEVICE", "cuda"),
                  os.getenv("DEEPSPEED", "false") == "true")
XTTS.load_model()

app = FastAPI()


@app.get("/speakers_list")
def get_speakers():
    return XTTS.get_speakers()


@app.post("/tts_to_audio/")
async def tts_to_audio(request: dict):
    return XTTS.process_tts_to_file(request["text"], request["speaker_wav"], request.get("language", "en"))
