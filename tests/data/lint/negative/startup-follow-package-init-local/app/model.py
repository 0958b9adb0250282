from transformers import AutoModel

MODEL = AutoModel.from_pretrained("/models/bge-small-en-v1.5")
