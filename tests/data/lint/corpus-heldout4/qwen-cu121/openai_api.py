"""OpenAI-style /v1/chat/completions for a local Qwen-Chat checkpoint (-c)."""
from argparse import ArgumentParser

import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.post("/v1/chat/completions")
async def create_chat_completion(request: dict):
    return {"object": "chat.completion", "choices": []}


if __name__ == "__main__":
    parser = ArgumentParser()
    parser.add_argument("-c", "--checkpoint-path", type=str, default="Qwen/Qwen-7B-Chat")
    parser.add_argument("--server-port", type=int, default=8000)
    parser.add_argument("--server-name", type=str, default="127.0.0.1")
    args = parser.parse_args()
    uvicorn.run(app, host=args.server_name, port=args.server_port, workers=1)
