"""A fake device's HTTP server on 127.0.0.1, served from a daemon thread for a ``with`` block.

Shared by the tests' fake vLLM (test_burn_in.py) and fake BMC (test_redfish_client.py): each
subclass builds its request handler and calls ``serve(handler)``; entering starts the thread,
leaving shuts the server down and closes its socket.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LocalServer:
    server: ThreadingHTTPServer
    thread: threading.Thread

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Binds a free port (``self.server.server_address``); nothing is served before ``with``."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
