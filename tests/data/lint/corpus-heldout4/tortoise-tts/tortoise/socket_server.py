"""Minimal TCP server streaming generated audio (not used by the Dockerfile)."""
import socket


def serve(host: str = "localhost", port: int = 5000) -> None:
    with socket.socket() as s:
        s.bind((host, port))
        s.listen()
