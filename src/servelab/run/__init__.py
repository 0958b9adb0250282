"""servelab.run: the runner."""
