import gradio as gr
from transformers import pipeline

captioner = pipeline("image-to-text", model="Salesforce/blip-image-captioning-base")
_translator = {}


def translate(text: str) -> str:
    if "t" not in _translator:
        _translator["t"] = pipeline("translation", model="Helsinki-NLP/opus-mt-en-de")
    return _translator["t"](text)[0]["translation_text"]


with gr.Blocks() as demo:
    image = gr.Image(type="pil")
    caption = gr.Textbox()
    german = gr.Textbox()
    gr.Button("Caption").click(lambda im: captioner(im)[0]["generated_text"], image, caption)
    gr.Button("Translate").click(translate, caption, german)

if __name__ == "__main__":
    demo.launch(server_name="0.0.0.0", server_port=7860)
