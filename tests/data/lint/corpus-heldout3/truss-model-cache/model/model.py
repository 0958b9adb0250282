import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
REVISION = "fe8a4ea1ffedaf415f4da2f062534de366a451e6"


class Model:
    def __init__(self, **kwargs) -> None:
        self.model = None
        self.tokenizer = None

    def load(self) -> None:
        # served from the hub cache the image was built with
        self.tokenizer = AutoTokenizer.from_pretrained(REPO, revision=REVISION, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(
            REPO, revision=REVISION, torch_dtype=torch.float16, local_files_only=True
        ).to("cuda")

    def predict(self, request: dict) -> dict:
        inputs = self.tokenizer(request["prompt"], return_tensors="pt").to("cuda")
        out = self.model.generate(**inputs, max_new_tokens=request.get("max_new_tokens", 128))
        return {"output": self.tokenizer.decode(out[0], skip_special_tokens=True)}
