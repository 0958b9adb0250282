from flask import Flask

app = Flask(__name__)


@app.get("/predict")
def predict() -> dict[str, str]:
    return {"label": "ok"}


if __name__ == "__main__":
    app.run()
