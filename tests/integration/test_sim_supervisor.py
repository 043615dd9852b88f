"""The simulator survives its own nodes dying, and `sim down` leaves nothing running.

Issue 11: a node whose sshd died crashed the supervisor on `sim reboot` (KeyError), `sim down`
then said "stopped" and left the other node running on its address, and `sim up` on that
subnet failed with "Address already in use"; `sim status` never showed the dead node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.integration.conftest import leftovers
from tests.integration.test_sim_cli import gpufleet, ssh

SUBNET = "127.0.46"


def _record(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "processes.json").read_text())
    return data


def _running(pid: int, start: int) -> bool:
    """From /proc: that very process (same start time) runs and is no zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[19]) == start and fields[0] not in "ZX"


def _recorded(record: dict[str, Any]) -> dict[str, dict[str, int]]:
    found = {
        f"{name} {part}": proc for name, parts in record["nodes"].items() for part, proc in parts.items()
    }
    found = {label: proc for label, proc in found.items() if isinstance(proc, dict)}
    return {**found, "supervisor": record["supervisor"]}


def _listening_ss() -> list[str]:
    """Listeners on the subnet, as `ss` sees them."""
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines() if line.split()[3].startswith(SUBNET + ".")]


def _listening_proc() -> list[str]:
    """Listeners on the subnet, read from /proc/net/tcp (state 0A)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address = ".".join(str(b) for b in reversed(bytes.fromhex(fields[1].split(":")[0])))
        if fields[3] == "0A" and address.startswith(SUBNET + "."):
            found.append(f"{address}:{int(fields[1].split(':')[1], 16)}")
    return found


def _status(base: list[str]) -> tuple[int, dict[str, str]]:
    done = gpufleet(*base, "status", check=False)
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    return done.returncode, lines


def _eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _assert_nothing_left(root: Path, started: dict[str, dict[str, int]]) -> None:
    still = [label for label, proc in started.items() if _running(proc["pid"], proc["start"])]
    assert still == []
    assert leftovers(root) == []
    assert _listening_ss() == [] and _listening_proc() == []


def test_a_dead_node_is_down_comes_back_on_reboot_and_down_stops_everything(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    base = ["--dir", str(root)]
    started: dict[str, dict[str, int]] = {}
    try:
        gpufleet(*base, "up", "--nodes", "2", "--subnet", SUBNET)
        record = _record(root)
        started.update(_recorded(record))
        supervisor = json.loads((root / "fleet.json").read_text())["owner"]
        assert record["supervisor"]["pid"] == supervisor
        assert {f"{SUBNET}.2:2222", f"{SUBNET}.3:2222", f"{SUBNET}.2:443", f"{SUBNET}.3:443"} <= set(
            _listening_ss()
        )
        code, lines = _status(base)
        assert code == 0 and lines["node01"].endswith("  up") and lines["node02"].endswith("  up")

        # node02's sshd (its PID namespace's PID 1) dies
        sshd = record["nodes"]["node02"]["sshd"]["pid"]
        assert b"sshd" in Path(f"/proc/{sshd}/cmdline").read_bytes()
        os.kill(sshd, signal.SIGKILL)
        # what the supervisor saw (how unshare reports its child's death depends on util-linux)
        _eventually(lambda: "node02 is down: sshd (pid" in (root / "supervisor.log").read_text())
        code, lines = _status(base)
        assert code == 1
        assert f"  down: sshd (pid {sshd}) " in lines["node02"], lines["node02"]
        assert lines["node01"].endswith("  up")
        assert f"{SUBNET}.3:2222" not in _listening_ss()
        # its tool server went with its namespace
        assert not _running(**record["nodes"]["node02"]["toolserver"])

        # the supervisor survives it, and a reboot brings the node back
        began = time.monotonic()
        reboot = gpufleet(*base, "reboot", "node02", check=False)
        assert (reboot.returncode, reboot.stdout.strip()) == (0, "node02: rebooted"), reboot.stderr
        assert time.monotonic() - began < 30
        assert ssh(root, f"{SUBNET}.3", "hostname").strip() == "node02"
        assert _running(**record["supervisor"])
        rebooted = _record(root)["nodes"]["node02"]
        assert rebooted["sshd"]["pid"] != sshd and "down" not in rebooted
        started.update(_recorded(_record(root)))
        code, lines = _status(base)
        assert code == 0 and lines["node02"].endswith("  up"), lines["node02"]

        # the supervisor itself dies: status says so, and `sim down` still stops everything
        os.kill(supervisor, signal.SIGKILL)
        _eventually(lambda: "is not running" in gpufleet(*base, "status", check=False).stdout)
        assert gpufleet(*base, "status", check=False).returncode == 1
        refused = gpufleet(*base, "reboot", "node01", check=False)
        assert refused.returncode == 2 and f"supervisor (pid {supervisor}) is not running" in refused.stderr
    finally:
        down = gpufleet(*base, "down", check=False)
    assert (down.returncode, down.stdout.strip()) == (0, "simulated fleet stopped"), down.stderr
    _assert_nothing_left(root, started)
    assert not (root / "fleet.json").exists() and not (root / "processes.json").exists()

    # the subnet is free again: the next fleet on it comes up, and goes
    try:
        again = gpufleet(*base, "up", "--nodes", "2", "--subnet", SUBNET, check=False)
        assert again.returncode == 0, again.stderr
        started = _recorded(_record(root))
        assert ssh(root, f"{SUBNET}.2", "hostname").strip() == "node01"
    finally:
        down = gpufleet(*base, "down", check=False)
    assert (down.returncode, down.stdout.strip()) == (0, "simulated fleet stopped"), down.stderr
    _assert_nothing_left(root, started)
