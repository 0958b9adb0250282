from fastapi import APIRouter
from huggingface_hub import snapshot_download
from transformers import AutoTokenizer

from shared_configs.configs import INTENT_MODEL_TAG, INTENT_MODEL_VERSION

router = APIRouter(prefix="/custom")

_INTENT_TOKENIZER = None
_INTENT_MODEL = None


def get_intent_model_tokenizer():
    global _INTENT_TOKENIZER
    if _INTENT_TOKENIZER is None:
        # plain distilbert tokenizer, not uploaded with the intent model
        _INTENT_TOKENIZER = AutoTokenizer.from_pretrained("distilbert-base-uncased")
    return _INTENT_TOKENIZER


def get_local_intent_model(model_name_or_path: str = INTENT_MODEL_VERSION, tag: str = INTENT_MODEL_TAG):
    global _INTENT_MODEL
    if _INTENT_MODEL is None:
        try:
            local_path = snapshot_download(repo_id=model_name_or_path, revision=tag, local_files_only=True)
        except Exception:
            print(f"Downloading model snapshot for {model_name_or_path}")
            local_path = snapshot_download(repo_id=model_name_or_path, revision=tag)
        from model_server.onyx_torch_model import HybridClassifier

        _INTENT_MODEL = HybridClassifier.from_pretrained(local_path)
    return _INTENT_MODEL


def warm_up_intent_model() -> None:
    tokenizer = get_intent_model_tokenizer()
    inputs = tokenizer("Onyx is amazing!", return_tensors="pt", truncation=True, padding=True)
    get_local_intent_model()(inputs)


@router.post("/intent-model")
async def process_intent_request(request: dict) -> dict:
    return {"is_keyword": False, "keywords": []}
