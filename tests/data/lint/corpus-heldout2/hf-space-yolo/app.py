import gradio as gr
from ultralytics import YOLO

model = YOLO("weights/best.pt")


def detect(image):
    return model(image)[0].plot()


demo = gr.Interface(fn=detect, inputs=gr.Image(type="numpy"), outputs="image")
demo.launch(server_name="0.0.0.0", server_port=7860)
