import logging

from flask import Flask, make_response
from flask_cors import CORS

from inference.predictor import InferenceAPI

logger = logging.getLogger(__name__)

app = Flask(__name__)
cors = CORS(app, supports_credentials=True)

inference_api = InferenceAPI()


@app.route("/healthy")
def healthy():
    return make_response("OK", 200)


@app.route("/propagate_in_video", methods=["POST"])
def propagate_in_video():
    return make_response("", 200)
