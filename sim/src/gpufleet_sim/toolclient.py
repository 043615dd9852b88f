"""The native client of a node's tool server (toolclient.c): built once per fleet, copied per tool.

A served tool is the compiled client with a trailer naming the node's server socket, the tool and
the Python client (toolserver.client_source) it runs instead when there is no server. Without a C
compiler the tools stay Python clients: slower (~12 ms more CPU per call), the same answers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("toolclient.c")


def build(directory: Path) -> bytes | None:
    """The compiled client, built into ``directory`` unless there already; None without a compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    binary = directory / f"toolclient-{digest}"
    if not binary.exists():
        partial = directory / f".toolclient-{digest}.{os.getpid()}"
        done = subprocess.run(
            [compiler, "-O2", "-o", str(partial), str(SOURCE)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            return None
        os.replace(partial, binary)
    return binary.read_bytes()


def tool(client: bytes, socket: Path, command: str, fallback: Path) -> bytes:
    """One tool: the client and its trailer ("<socket>\\0<command>\\0<fallback>\\0", then its length)."""
    trailer = b"".join(os.fsencode(str(part)) + b"\0" for part in (socket, command, fallback))
    return client + trailer + len(trailer).to_bytes(4, "little")
