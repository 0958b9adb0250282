import click
import uvicorn
from fastapi import FastAPI, File, UploadFile

from app.asr_models.openai_whisper_engine import OpenAIWhisperASR

asr_model = OpenAIWhisperASR()
asr_model.load_model()

app = FastAPI(title="Whisper ASR Webservice")


@app.post("/asr", tags=["Endpoints"])
async def asr(audio_file: UploadFile = File(...)):
    return asr_model.transcribe(await audio_file.read())


@click.command()
@click.option("-h", "--host", default="0.0.0.0", help="Host for the webservice (default: 0.0.0.0)")
@click.option("-p", "--port", default=9000, help="Port for the webservice (default: 9000)")
def start(host: str, port: int) -> None:
    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    start()
