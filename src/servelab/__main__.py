"""``python -m servelab``."""

from servelab.cli import entry

entry()
