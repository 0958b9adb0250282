import argparse

import gradio as gr


def launch() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", nargs="?", const="0.0.0.0", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7865)
    args, _ = parser.parse_known_args()
    with gr.Blocks(title="Fooocus") as demo:
        gr.Markdown("Fooocus")
    demo.queue().launch(server_name=args.listen, server_port=args.port)
