"""The fixture's server: answers /health; the model comes from the mounted /models."""

from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()


HTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
