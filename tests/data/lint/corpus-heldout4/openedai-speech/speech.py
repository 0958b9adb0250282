#!/usr/bin/env python3
"""OpenAI /v1/audio/speech on top of piper (tts-1) and XTTS v2 (tts-1-hd)."""
import argparse
import subprocess

import uvicorn
from openedai import OpenAIStub

app = OpenAIStub()


@app.post("/v1/audio/speech")
async def generate_speech(request: dict):
    voice = request.get("voice", "alloy")
    proc = subprocess.run(["piper", "--data-dir", "voices", "--model", f"voices/{voice}.onnx", "--output-raw"],
                          input=request.get("input", "").encode(), capture_output=True)
    return proc.stdout


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="OpenedAI Speech API Server")
    parser.add_argument("--preload", default=None, help="Preload an XTTS model; otherwise it loads on first use.")
    parser.add_argument("-P", "--port", default=8000, type=int)
    parser.add_argument("-H", "--host", default="0.0.0.0")
    args = parser.parse_args()

    app.register_model("tts-1")
    app.register_model("tts-1-hd")
    uvicorn.run(app, host=args.host, port=args.port)
