from flask import Blueprint

blueprint = Blueprint("routes", __name__)


@blueprint.route("/")
def home():
    return "<h1>Welcome to DeepFace API!</h1>"


@blueprint.route("/verify", methods=["POST"])
def verify():
    return {"verified": False}
