"""GPT-SoVITS training and inference web UI (Gradio, port 9874); the sub-tools listen on 9871-9873 and 9880."""
import os

import gradio as gr

webui_port_main = int(os.environ.get("webui_port_main", 9874))
is_share = os.environ.get("is_share", "False") == "True"

with gr.Blocks(title="GPT-SoVITS WebUI") as app:
    gr.Markdown("GPT-SoVITS")

app.queue().launch(server_name="0.0.0.0", inbrowser=False, share=is_share, server_port=webui_port_main, quiet=True)
