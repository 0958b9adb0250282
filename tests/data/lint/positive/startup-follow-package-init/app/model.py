from transformers import AutoModel

MODEL = AutoModel.from_pretrained("BAAI/bge-small-en-v1.5")
