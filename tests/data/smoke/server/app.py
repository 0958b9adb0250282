"""Fixture serving image for servelab's smoke tests (standard library only).

FIXTURE_MODE chooses the behaviour:
  good         listen, load /models/model.json, /health 200 once loaded, POST /predict
  rofs         write a cache file into /app at start (read-only root filesystem -> crash)
  download     fetch weights from the network at start (no network -> crash)
  never-ready  listen, but /health answers 503 forever
  crash        exit with code 3 at start
  bench        like good, with LISTEN/FIRST200 lines on CLOCK_MONOTONIC for bench/
The host name used by "download" is under .invalid (RFC 2606): it never resolves anywhere.
"""

import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("FIXTURE_MODE", "good")
PORT = int(os.environ.get("PORT", "8000"))
MODEL = os.path.join(os.environ.get("MODEL_DIR", "/models"), "model.json")
READY = threading.Event()
STATE = {}
FIRST_200 = threading.Lock()


def log(msg):
    sys.stdout.write(msg + "\n")  # one write: lines of two threads never interleave
    sys.stdout.flush()


def load():
    time.sleep(float(os.environ.get("LOAD_DELAY", "0")))
    try:
        with open(MODEL) as f:
            STATE["model"] = json.load(f)
    except OSError as e:
        log(f"error: cannot load model {MODEL}: {e}")
        os._exit(1)
    if MODE != "never-ready":
        READY.set()
        log("model loaded")


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/health":
            self.reply(404, {})
        elif READY.is_set():
            if MODE == "bench" and FIRST_200.acquire(blocking=False):
                log(f"FIRST200 {time.monotonic():.6f}")
            self.reply(200, {"status": "ok"})
        else:
            self.reply(503, {"status": "loading"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        doc = json.loads(self.rfile.read(n) or b"{}")
        m = STATE["model"]
        y = sum(w * x for w, x in zip(m["weights"], doc["inputs"])) + m["bias"]
        self.reply(200, {"model": m["name"], "prediction": round(y, 6)})

    def log_message(self, *args):
        pass


def main():
    log(f"fixture mode {MODE}, uid {os.getuid()}")
    if MODE == "crash":
        log("fatal: the fixture crashes on purpose")
        sys.exit(3)
    if MODE == "rofs":
        os.makedirs("/app/cache", exist_ok=True)
        with open("/app/cache/state.json", "w") as f:
            f.write("{}")
    if MODE == "download":
        urllib.request.urlopen("http://weights.servelab-test.invalid/model.bin", timeout=5)
    time.sleep(float(os.environ.get("LISTEN_DELAY", "0")))
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    if MODE == "bench":
        log(f"LISTEN {time.monotonic():.6f}")
    threading.Thread(target=load, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
