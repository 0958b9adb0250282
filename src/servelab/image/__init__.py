"""servelab.image: reading and naming images."""
