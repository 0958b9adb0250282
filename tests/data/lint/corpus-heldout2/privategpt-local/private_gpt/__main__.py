import os

import uvicorn

from private_gpt.main import app

# models are read from ./models (a volume filled by scripts/setup), never fetched here
uvicorn.run(app, host="0.0.0.0", port=int(os.environ.get("PORT", "8001")), log_config=None)
