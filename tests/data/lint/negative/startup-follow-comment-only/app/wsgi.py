"""WSGI entry.

Earlier versions called snapshot_download("org/model") here; the model is now mounted.
"""
from app.model import load

# model = AutoModel.from_pretrained("distilbert/distilbert-base-uncased")
# snapshot_download(repo_id="distilbert/distilbert-base-uncased")
application = load("/models/distilbert")
