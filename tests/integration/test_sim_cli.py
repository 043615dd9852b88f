"""`gpufleet-sim` from the command line: a supervisor owns the nodes; down leaves nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import paramiko
import yaml

from tests.integration.conftest import leftovers


def gpufleet(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet_sim.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


class _InventoryLoader(yaml.SafeLoader):
    """Reads the sim inventory; vaulted values stay opaque text."""


_InventoryLoader.add_constructor("!vault", lambda loader, node: loader.construct_scalar(node))


def ssh(root: Path, address: str, command: str) -> str:
    inventory = yaml.load((root / "inventory.yml").read_text(), Loader=_InventoryLoader)
    group = inventory["all"]["children"]["gpu_nodes"]["vars"]
    client = paramiko.SSHClient()
    client.load_host_keys(str(root / "ssh" / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        address,
        port=group["ansible_port"],
        username="root",
        key_filename=group["ansible_ssh_private_key_file"],
    )
    try:
        _, stdout, _ = client.exec_command(command)
        return stdout.read().decode()
    finally:
        client.close()


def test_up_fault_status_down(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    base = ["--dir", str(root)]
    try:
        up = gpufleet(*base, "up", "--nodes", "2", "--subnet", "127.0.4")
        assert "node02  127.0.4.3:2222  up" in up.stdout
        again = gpufleet(*base, "up", "--nodes", "2", "--subnet", "127.0.4", check=False)
        assert again.returncode == 2 and "already up" in again.stderr

        # Each node is its own host: its own hostname, tools and GPUs.
        assert ssh(root, "127.0.4.2", "hostname").strip() == "node01"
        listing = ssh(root, "127.0.4.3", "hostname; nvidia-smi -L | wc -l; command -v nvidia-smi")
        assert listing.split() == ["node02", "16", "/usr/local/sbin/nvidia-smi"]

        gpufleet(*base, "fault", "node02", "persistence-off")
        status = gpufleet(*base, "status").stdout
        assert "node02  127.0.4.3:2222  b300-16  gpus=16 nics=8  faults=persistence-off" in status
        pm = ssh(root, "127.0.4.3", "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
        assert set(pm.split()) == {"Disabled"}
        unknown = gpufleet(*base, "fault", "node02", "no-such-fault", check=False)
        assert unknown.returncode == 2

        gpufleet(*base, "fault", "node02", "--clear")
        assert "faults=-" in gpufleet(*base, "status").stdout.splitlines()[1]

        # a reboot drops runtime settings: the 1000 W limit set by hand is gone afterwards
        ssh(root, "127.0.4.2", "nvidia-smi -pl 1000")
        assert gpufleet(*base, "reboot", "node01").stdout.strip() == "node01: rebooted"
        limits = ssh(root, "127.0.4.2", "nvidia-smi --query-gpu=power.limit --format=csv,noheader,nounits")
        assert set(limits.split()) == {"1400.00"}
    finally:
        down = gpufleet(*base, "down", check=False)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert leftovers(root) == []
    assert str(root) not in Path("/proc/self/mountinfo").read_text()
    assert gpufleet(*base, "down").stdout.strip() == "no simulated fleet was up"
