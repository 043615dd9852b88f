"""A TCP port nothing listens on now, for a daemon a harness starts on loopback (or a test's
"nothing answers here"). The kernel picks it; another process may take it before it is used, a race
the callers accept on these machines."""

from __future__ import annotations

import socket


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port
