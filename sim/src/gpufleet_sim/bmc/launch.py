"""What the Fleet needs to run a node's BMC: its certificate and account, and its command line."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from gpufleet_sim import state
from gpufleet_sim.bmc import passwords, tls

PORT = 443
# The BMC account the sim creates on every node (DMTF mockups and OpenBMC use "root"/"admin").
USERNAME = "admin"


def prepare(bmc_dir: Path, name: str, address: str, node_dir: Path) -> str:
    """Issues the BMC's certificate and account; returns the account's password (never stored)."""
    tls.issue(bmc_dir, name, address)
    password = passwords.new_password()
    with state.locked(node_dir) as current:
        current["address"] = address
        current.setdefault("bmc", {"state": "up"}).update(username=USERNAME, **passwords.hashed(password))
    return password


def argv(bmc_dir: Path, name: str, address: str, node_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gpufleet_sim.bmc.server",
        "--node-dir",
        str(node_dir),
        "--address",
        address,
        "--port",
        str(PORT),
        "--cert",
        str(bmc_dir / f"{name}.pem"),
        "--key",
        str(bmc_dir / f"{name}-key.pem"),
    ]


def listening(address: str) -> bool:
    try:
        with socket.create_connection((address, PORT), timeout=0.5):
            return True
    except OSError:
        return False
