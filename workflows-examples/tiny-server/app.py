"""A tiny model server (standard library only) for servelab's example workflows.

It listens at once and loads the model in the background, so "running" and "ready" differ:
GET /health answers 503 until the model is loaded, then 200. POST /predict with
{"inputs": [x1, x2, x3]} returns {"model": "tiny-linear", "prediction": w.x + b}.

The model is model.safetensors in MODEL_DIR (/models): tensors "weight" (F32, 3) and "bias"
(F32, 1), read with struct and json. Nothing is written to disk and nothing is downloaded.
"""

import json
import os
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
MODEL_PATH = os.path.join(os.environ.get("MODEL_DIR", "/models"), "model.safetensors")
STARTED = time.monotonic()
MODEL = {}
READY = threading.Event()


def log(message):
    sys.stdout.write(f"[{time.monotonic() - STARTED:7.3f}s] {message}\n")
    sys.stdout.flush()


def read_safetensors(path):
    """{name: [floats]} of a safetensors file holding F32 tensors, and its metadata."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        start, end = t["data_offsets"]
        tensors[name] = list(struct.unpack(f"<{(end - start) // 4}f", data[start:end]))
    return tensors, meta


def load_model():
    try:
        tensors, meta = read_safetensors(MODEL_PATH)
    except (OSError, ValueError, KeyError, struct.error) as e:
        log(f"error: model {MODEL_PATH} cannot be read: {e}")
        os._exit(1)
    MODEL.update(name=meta.get("name", "model"), weight=tensors["weight"], bias=tensors["bias"][0])
    READY.set()
    log(f"model {MODEL['name']} loaded from {MODEL_PATH}")


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/health":
            self.reply(404, {"error": "not found"})
        elif READY.is_set():
            self.reply(200, {"status": "ok", "model": MODEL["name"]})
        else:
            self.reply(503, {"status": "loading"})

    def do_POST(self):
        if self.path != "/predict" or not READY.is_set():
            self.reply(404 if self.path != "/predict" else 503, {"error": "not available"})
            return
        try:
            length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
            inputs = json.loads(self.rfile.read(length) or b"{}")["inputs"]
            if len(inputs) != len(MODEL["weight"]):
                raise ValueError(f"inputs must be {len(MODEL['weight'])} numbers")
            value = sum(w * float(x) for w, x in zip(MODEL["weight"], inputs)) + MODEL["bias"]
        except (ValueError, TypeError, KeyError) as e:
            self.reply(400, {"error": str(e)})
            return
        self.reply(200, {"model": MODEL["name"], "prediction": round(value, 6)})

    def log_message(self, fmt, *args):
        if self.path != "/health":
            log(f"{self.command} {self.path}")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)  # noqa: S104 (in a container)
    log(f"listening on port {PORT}")
    threading.Thread(target=load_model, daemon=True).start()
    server.serve_forever()
