"""A tiny model server, standard library only: the serving image servelab's example builds.

It listens first, then loads the model from the mounted directory in the background, so
"running" and "ready" differ: ``GET /health`` answers 503 until the model is loaded, then 200
with ``{"status": "ok", "model": ..., "model_bytes_read": N, "loaded_after_s": S}``. Loading
means reading every file of the model directory once, as a weights loader does (the weights
of a real model are gigabytes: ``examples/make_model.py`` makes such a directory), and
parsing ``model.json``; ``model_bytes_read`` is what servelab records as the bytes the server
read before ready.
``POST /predict`` with ``{"inputs": [x1, x2, x3]}`` returns
``{"model": "tiny-linear", "prediction": w.x + b}``.

Environment: PORT (8000), MODEL_DIR (/models), MODEL_FILE (model.json), and optionally
MODEL_SHA256 (the model file's expected sha256; a mismatch stops the server). Logs go to
stdout. Nothing is written to disk and nothing is downloaded.
"""

import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
MODEL_DIR = os.environ.get("MODEL_DIR", "/models")
MODEL_FILE = os.environ.get("MODEL_FILE", "model.json")
MODEL_SHA256 = os.environ.get("MODEL_SHA256", "").removeprefix("sha256:")
MAX_BODY = 1 << 20
READ_CHUNK = 8 << 20

STARTED = time.monotonic()
MODEL = {}
READY = threading.Event()


def log(message):
    elapsed = time.monotonic() - STARTED
    sys.stdout.write(f"[{elapsed:8.3f}s] {message}\n")
    sys.stdout.flush()


def read_model_dir():
    """Read every file under MODEL_DIR once (sorted, as a loader reads its shards); bytes."""
    total = 0
    buf = bytearray(READ_CHUNK)
    for dirpath, dirnames, names in os.walk(MODEL_DIR):
        dirnames.sort()
        for name in sorted(names):
            with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    total += n
    return total


def load_model():
    path = os.path.join(MODEL_DIR, MODEL_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        log(f"error: model file {path} cannot be read: {e}")
        os._exit(1)
    digest = hashlib.sha256(raw).hexdigest()
    if MODEL_SHA256 and digest != MODEL_SHA256:
        log(f"error: model sha256 mismatch for {path}: got {digest}, expected {MODEL_SHA256}")
        os._exit(1)
    model = json.loads(raw)
    weights = [float(w) for w in model["weights"]]
    try:
        read = read_model_dir()
    except OSError as e:
        log(f"error: the model directory {MODEL_DIR} cannot be read: {e}")
        os._exit(1)
    MODEL.update(name=model.get("name", "model"), weights=weights,
                 bias=float(model.get("bias", 0.0)), sha256=digest, bytes_read=read,
                 loaded_after_s=round(time.monotonic() - STARTED, 6))
    READY.set()
    log(f"model {MODEL['name']} loaded from {MODEL_DIR} (sha256 {digest[:12]}, "
        f"{len(weights)} weights, {read} bytes read)")


def predict(inputs):
    weights = MODEL["weights"]
    if not isinstance(inputs, list) or len(inputs) != len(weights):
        raise ValueError(f"inputs must be a list of {len(weights)} numbers")
    total = sum(float(w) * float(x) for w, x in zip(weights, inputs)) + MODEL["bias"]
    return round(total, 6)


class Handler(BaseHTTPRequestHandler):
    server_version = "tiny-model-server/1"

    def reply(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            if READY.is_set():
                self.reply(200, {"status": "ok", "model": MODEL["name"],
                                 "model_bytes_read": MODEL["bytes_read"],
                                 "loaded_after_s": MODEL["loaded_after_s"]})
            else:
                self.reply(503, {"status": "loading"})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/predict":
            self.reply(404, {"error": "not found"})
            return
        if not READY.is_set():
            self.reply(503, {"error": "model not loaded"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.reply(413, {"error": "body too large"})
            return
        try:
            doc = json.loads(self.rfile.read(length) or b"{}")
            result = predict(doc.get("inputs"))
        except (ValueError, TypeError, AttributeError) as e:
            self.reply(400, {"error": str(e)})
            return
        self.reply(200, {"model": MODEL["name"], "prediction": result})

    def log_message(self, fmt, *args):
        if self.path != "/health":
            log(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}")


def main():
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)  # noqa: S104 (inside a container)
    log(f"listening on port {PORT}")
    threading.Thread(target=load_model, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
