"""Mean-pooled sentence vectors from the model saved under ./models/model (a local path)."""
from typing import Optional

from pydantic import BaseModel
from transformers import AutoModel, AutoTokenizer


class VectorInputConfig(BaseModel):
    pooling_strategy: Optional[str] = "masked_mean"


class VectorInput(BaseModel):
    text: str
    config: Optional[VectorInputConfig] = None


class Vectorizer:
    def __init__(self, model_path: str, cuda: bool, cuda_core: str) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModel.from_pretrained(model_path)
        if cuda:
            self.model.to(cuda_core)

    async def vectorize(self, text: str, config):
        tokens = self.tokenizer(text, return_tensors="pt", truncation=True)
        return self.model(**tokens).last_hidden_state.mean(dim=1)[0].detach()
