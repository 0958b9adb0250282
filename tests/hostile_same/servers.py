"""Loopback servers that misbehave, for the deadline tests: one that accepts connections and
never answers, one that answers a byte at a time. 127.0.0.1 only; each stops with its test."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def _accepting(backlog: int, on_conn: Callable[[socket.socket, threading.Event], None],
               idle: Callable[[], None] = lambda: None) -> Iterator[int]:
    """A listening port on 127.0.0.1 whose loop hands each connection to *on_conn* and calls
    *idle* between accepts (every 0.1 s at most); yields the port, stops with the block."""
    stop = threading.Event()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    srv.settimeout(0.1)

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = srv.accept()
                on_conn(conn, stop)
            idle()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        srv.close()


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection, reads what is sent and never says a
    word (a hung engine or registry); yields the port."""
    held: list[socket.socket] = []

    def hold(conn: socket.socket, _stop: threading.Event) -> None:
        conn.settimeout(0.1)
        held.append(conn)

    def drain() -> None:  # so that a sender is never blocked by a full buffer
        for c in held:
            with contextlib.suppress(OSError):
                c.recv(65536)

    try:
        with _accepting(64, hold, drain) as port:
            yield port
    finally:
        for c in held:
            c.close()


@contextlib.contextmanager
def dribbling_server(body_len: int = 200, every_s: float = 0.2) -> Iterator[int]:
    """A port on 127.0.0.1 that answers any request ``200`` with a body of *body_len* bytes,
    one byte every *every_s* seconds: each read gets a byte long before a socket timeout."""

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image."
                         b"manifest.v1+json\r\nContent-Length: %d\r\n\r\n" % body_len)
            for _ in range(body_len):
                if stop.wait(every_s):
                    return
                conn.sendall(b" ")

    def spawn(conn: socket.socket, stop: threading.Event) -> None:
        threading.Thread(target=answer, args=(conn, stop), daemon=True).start()

    with _accepting(8, spawn) as port:
        yield port


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
