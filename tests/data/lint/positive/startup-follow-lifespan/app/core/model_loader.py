from transformers import AutoModelForSequenceClassification, AutoTokenizer

MODEL_ID = "cardiffnlp/twitter-roberta-base-sentiment-latest"
_state = {}


def load_model() -> None:
    _state["tok"] = AutoTokenizer.from_pretrained(MODEL_ID)
    _state["model"] = AutoModelForSequenceClassification.from_pretrained(MODEL_ID)


def classify(text: str) -> str:
    out = _state["model"](**_state["tok"](text, return_tensors="pt"))
    return str(out.logits.argmax().item())
