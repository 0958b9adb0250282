import logging
import os

from label_studio_ml.api import init_app

from model import NewModel

logging.basicConfig(level=os.getenv("LOG_LEVEL", "INFO"))

app = init_app(model_class=NewModel)

if __name__ == "__main__":
    app.run(host="0.0.0.0", port=int(os.getenv("PORT", 9090)))
