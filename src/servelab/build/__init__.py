"""servelab.build: the build stage."""
