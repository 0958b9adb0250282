from flask import Flask, jsonify, request

from embedder import Embedder


def create_app() -> Flask:
    app = Flask(__name__)
    emb = Embedder()

    @app.post("/embed")
    def embed():
        return jsonify(emb.encode(request.json["texts"]))

    return app
