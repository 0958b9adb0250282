import argparse

import uvicorn

from .server import build_app

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    uvicorn.run(build_app(), host="0.0.0.0", port=ap.parse_args().port)
