"""The sshd_config of a simulated host (a node, a SONiC leaf): what every one has, and its own lines.

Key-only root login with host keys the harness made, no PAM, no DNS, no pid file; ``StrictModes no``
because the host's files live in directories the harness owns (a node's /root is a bind mount).
"""

from __future__ import annotations

from pathlib import Path

_COMMON = [
    "PidFile none",
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "StrictModes no",
    "UseDNS no",
]


def render(address: str, port: int, host_key: Path, own: list[str]) -> str:
    """The config listening on ``address:port`` with ``host_key``, then the host's ``own`` lines."""
    lines = [f"ListenAddress {address}:{port}", f"HostKey {host_key}", *_COMMON, *own, "LogLevel ERROR"]
    return "\n".join([*lines, ""])
