"""servelab.smoke: the smoke stage."""
