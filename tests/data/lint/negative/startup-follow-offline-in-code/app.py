import os

os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from transformers import pipeline  # noqa: E402

asr = pipeline("automatic-speech-recognition", model="openai/whisper-tiny")

if __name__ == "__main__":
    import gradio as gr

    gr.Interface(fn=lambda a: asr(a)["text"], inputs="audio", outputs="text").launch(
        server_name="0.0.0.0", server_port=8000)
