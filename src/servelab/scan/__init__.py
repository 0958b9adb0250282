"""servelab.scan: the scan stage."""
