import gradio as gr
from transformers import pipeline

asr = pipeline("automatic-speech-recognition", model="openai/whisper-small")


def transcribe(path: str) -> str:
    return asr(path)["text"]


demo = gr.Interface(fn=transcribe, inputs=gr.Audio(type="filepath"), outputs="text")
demo.launch(server_name="0.0.0.0", server_port=7860)
