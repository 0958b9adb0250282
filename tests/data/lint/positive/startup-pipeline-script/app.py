from transformers import pipeline

classify = pipeline(task="text-classification", model="distilbert/distilbert-base-uncased-finetuned-sst-2-english")


def handler(text: str) -> dict:
    return classify(text)[0]
