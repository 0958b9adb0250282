import torch
from torch import nn


class HybridClassifier(nn.Module):
    @classmethod
    def from_pretrained(cls, path: str) -> "HybridClassifier":
        model = cls()
        model.load_state_dict(torch.load(f"{path}/pytorch_model.pt", map_location="cpu"), strict=False)
        return model.eval()
