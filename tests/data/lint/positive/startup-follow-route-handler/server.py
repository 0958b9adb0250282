from fastapi import FastAPI
from transformers import pipeline

app = FastAPI()
_pipe = None


@app.post("/summarize")
def summarize(body: dict) -> dict:
    global _pipe
    if _pipe is None:
        _pipe = pipeline("summarization", model="sshleifer/distilbart-cnn-12-6")
    return _pipe(body["text"])[0]
