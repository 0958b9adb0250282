"""Gradio chat demo for a local Qwen-Chat checkpoint (-c), served on --server-name:--server-port."""
from argparse import ArgumentParser

DEFAULT_CKPT_PATH = "Qwen/Qwen-7B-Chat"


def _get_args():
    parser = ArgumentParser()
    parser.add_argument("-c", "--checkpoint-path", type=str, default=DEFAULT_CKPT_PATH)
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--server-port", type=int, default=8000)
    parser.add_argument("--server-name", type=str, default="127.0.0.1")
    return parser.parse_args()


def _load_model_tokenizer(args):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint_path, trust_remote_code=True)
    device_map = "cpu" if args.cpu_only else "auto"
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint_path, device_map=device_map,
                                                 trust_remote_code=True).eval()
    return model, tokenizer


def main():
    import gradio as gr

    args = _get_args()
    model, tokenizer = _load_model_tokenizer(args)
    with gr.Blocks() as demo:
        gr.Markdown("Qwen-Chat")
    demo.queue().launch(server_port=args.server_port, server_name=args.server_name)


if __name__ == "__main__":
    main()
