"""Loopback servers that misbehave, for the deadline tests: one that accepts connections and
never answers, one that answers a byte at a time. 127.0.0.1 only; each stops with its test."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection, reads what is sent and never says a
    word (a hung engine or registry); yields the port."""
    stop = threading.Event()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.1)
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = srv.accept()
                conn.settimeout(0.1)
                held.append(conn)
            for c in held:  # drain, so a sender is never blocked by a full buffer
                with contextlib.suppress(OSError):
                    c.recv(65536)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in [*held, srv]:
            c.close()


@contextlib.contextmanager
def dribbling_server(body_len: int = 200, every_s: float = 0.2) -> Iterator[int]:
    """A port on 127.0.0.1 that answers any request ``200`` with a body of *body_len* bytes,
    one byte every *every_s* seconds: each read gets a byte long before a socket timeout."""
    stop = threading.Event()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.1)

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image."
                         b"manifest.v1+json\r\nContent-Length: %d\r\n\r\n" % body_len)
            for _ in range(body_len):
                if stop.wait(every_s):
                    return
                conn.sendall(b" ")

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = srv.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        srv.close()


@contextlib.contextmanager
def stalling_registry() -> Iterator[int]:
    """A registry on 127.0.0.1 that has no blob (HEAD 404), starts an upload (POST 202 with a
    Location) and then takes the blob's bytes and never answers (a stalled push)."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            self.send_response(202)
            self.send_header("Location", "/v2/team/app/blobs/uploads/u1?state=x")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stop.wait(30)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
