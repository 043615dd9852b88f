"""What the simulated management services (the BMC's Redfish, a leaf's NVUE) share as HTTPS servers.

``TlsServer``: a threading HTTP server on a TLS socket whose handshake runs in the request's thread;
``Handler``: HTTP/1.1 with a read timeout per connection; ``basic_credentials`` and ``read_body``:
a request's basic-auth pair and its body, capped; ``serve_in_thread`` / ``stop_serving`` and
``stop_on_signals``: the listener's life in a process; ``context_for``: the server's TLS context.
"""

from __future__ import annotations

import base64
import binascii
import signal
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

# How long a connection may sit between reads before the server drops it.
READ_TIMEOUT_S = 30


class TlsServer(ThreadingHTTPServer):
    """``handler`` behind a TLS socket; errors go to stderr prefixed with ``name``."""

    daemon_threads = True
    name = "https"

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext
    ) -> None:
        super().__init__(address, handler)
        # The handshake runs in the request's thread, so a slow client cannot stall the listener.
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        print(f"{self.name}: {client_address[0]}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(READ_TIMEOUT_S)


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header; ("", "") when it does not decode,
    None when the header is absent or of another scheme."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return "", ""
    return user, password


def read_body(handler: BaseHTTPRequestHandler, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes; read whatever was sent, so the next request on a
    kept-alive connection parses."""
    try:
        length = int(handler.headers.get("Content-Length") or 0)
    except ValueError:
        length = 0
    return handler.rfile.read(min(length, limit)) if length > 0 else b""


def serve_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    return thread


def stop_serving(server: ThreadingHTTPServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join()


def stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set: the service's main loop ends when it is."""
    stopping = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return stopping


def context_for(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context
