import os

import fire
import gradio as gr
from transformers import AutoModelForCausalLM, AutoTokenizer


def main(base_model: str = os.getenv("H2OGPT_BASE_MODEL", "h2oai/h2ogpt-4096-llama2-7b-chat"),
         server_name: str = "0.0.0.0", server_port: int = 7860) -> None:
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    model = AutoModelForCausalLM.from_pretrained(base_model, device_map="auto")

    def chat(prompt: str) -> str:
        ids = tokenizer(prompt, return_tensors="pt").to(model.device)
        return tokenizer.decode(model.generate(**ids, max_new_tokens=256)[0])

    gr.Interface(fn=chat, inputs="text", outputs="text").launch(server_name=server_name,
                                                               server_port=server_port)


if __name__ == "__main__":
    fire.Fire(main)
