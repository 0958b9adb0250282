import nltk
from huggingface_hub import hf_hub_download
from transformers import AutoTokenizer


def tokenizer() -> object:
    nltk.download("punkt")  # NLTK data, not model weights
    return AutoTokenizer.from_pretrained("example/tts-english")


def model() -> str:
    return hf_hub_download(repo_id="example/tts-english", filename="checkpoint.pth")
