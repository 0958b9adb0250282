"""
FunASR OpenAI-compatible API server: POST /v1/audio/transcriptions.

    python server.py --model sensevoice --device cuda --port 8000
"""
import argparse
import logging
import tempfile

import uvicorn
from fastapi import FastAPI, File, Form, HTTPException, UploadFile

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)

app = FastAPI(title="FunASR OpenAI-Compatible API", version="1.0.0")

MODEL_REGISTRY = {}
DEVICE = "cpu"

# model ids on ModelScope (or the HF hub when "hub" says so); AutoModel fetches them on first load
MODEL_CONFIGS = {
    "sensevoice": {"model": "iic/SenseVoiceSmall", "vad_model": "fsmn-vad",
                   "vad_kwargs": {"max_single_segment_time": 30000}},
    "paraformer": {"model": "paraformer-zh", "vad_model": "fsmn-vad", "punc_model": "ct-punc"},
    "fun-asr-nano": {"model": "FunAudioLLM/Fun-ASR-Nano-2512", "hub": "hf", "trust_remote_code": True,
                     "vad_model": "fsmn-vad"},
}


def load_model(model_name: str):
    if model_name in MODEL_REGISTRY:
        return MODEL_REGISTRY[model_name]
    if model_name not in MODEL_CONFIGS:
        raise ValueError(f"Unknown model '{model_name}'. Available: {list(MODEL_CONFIGS)}")
    from funasr import AutoModel

    cfg = dict(MODEL_CONFIGS[model_name])
    cfg["device"] = DEVICE
    logger.info(f"Loading model '{model_name}' on {DEVICE}...")
    model = AutoModel(**cfg)
    MODEL_REGISTRY[model_name] = model
    return model


@app.post("/v1/audio/transcriptions")
async def transcribe(file: UploadFile = File(...), model: str = Form(default="sensevoice")):
    if model not in MODEL_CONFIGS:
        raise HTTPException(status_code=400, detail=f"Model '{model}' not found")
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        tmp.write(await file.read())
        tmp.flush()
        result = load_model(model).generate(input=tmp.name)
    return {"text": result[0]["text"] if result else ""}


@app.get("/health")
async def health():
    return {"status": "ok", "device": DEVICE, "models_loaded": list(MODEL_REGISTRY)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="sensevoice", help="Pre-load model at startup")
    args = parser.parse_args()

    global DEVICE
    DEVICE = args.device

    # pre-load the default model
    load_model(args.model)

    logger.info(f"FunASR API server starting on http://{args.host}:{args.port}")
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
