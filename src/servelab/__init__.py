"""servelab: check that an AI-serving image is rebuildable and cheap to start."""

__version__ = "0.1.0"
