from .model import MODEL
