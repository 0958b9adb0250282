from fastapi import FastAPI
from transformers import pipeline

app = FastAPI()
classifier = pipeline("sentiment-analysis")


@app.post("/classify")
def classify(body: dict) -> dict:
    return classifier(body["text"])[0]
