import os

from transformers import AutoModelForCausalLM, AutoTokenizer

MODEL_DIR = os.environ.get("MODEL_DIR", "meta-llama/Llama-3.2-1B")
tok = AutoTokenizer.from_pretrained(MODEL_DIR)
model = AutoModelForCausalLM.from_pretrained(os.path.join(MODEL_DIR, ""))

if __name__ == "__main__":
    print(model.config)
