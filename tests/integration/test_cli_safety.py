"""What every gpufleet command promises before it touches a node: it runs the ansible-playbook of its
own installation (no activated venv needed), it never connects to a node whose host key is wrong, and
nothing a local user or an older gpufleet left at the node's run lock makes it hang, read another
file into a report, or print a control character: each is refused at once or taken with --break-lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import node_ssh

# gpufleet as an operator starts it from a plain shell: the venv's script, the venv not on PATH.
GPUFLEET = Path(sys.executable).parent / "gpufleet"
PLAIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.71")
    return started


def _facts(fleet: Fleet, report_dir: Path) -> tuple[int, dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = PLAIN_PATH
    argv = [str(GPUFLEET), "facts", "--inventory", str(fleet.inventory_path), "--report-dir", str(report_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    report_file = report_dir / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return done.returncode, report, done.stderr


def test_a_node_with_the_wrong_host_key_is_never_read(fleet: Fleet, tmp_path: Path) -> None:
    # Runs first, before any ssh master to the node exists that could skip the key check.
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True
    )
    keytype, key = (tmp_path / "impostor.pub").read_text().split()[:2]
    original = fleet.known_hosts.read_text()
    fleet.known_hosts.write_text(
        "".join(f"{line.split()[0]} {keytype} {key}\n" for line in original.splitlines() if line.strip())
    )
    try:
        code, report, stderr = _facts(fleet, tmp_path / "report")
    finally:
        fleet.known_hosts.write_text(original)
    assert code == 1, stderr
    host = report["hosts"]["node01"]
    assert host["status"] == "unreachable"
    assert "host key" in host["message"].lower() or "identification has changed" in host["message"].lower()
    assert "gpufleet_gpus" not in host.get("facts", {})


def test_gpufleet_runs_its_own_ansible_from_a_plain_shell(fleet: Fleet, tmp_path: Path) -> None:
    code, report, stderr = _facts(fleet, tmp_path / "report")
    assert "not found" not in stderr
    assert code == 0, stderr
    assert report["hosts"]["node01"]["status"] == "ok"
    assert len(report["hosts"]["node01"]["facts"]["gpufleet_gpus"]) == 16


# The node's run lock (module_utils/node/run_lock.py) and what a local user, or an older gpufleet, may
# leave at its path. Each is refused at once (exit 2, refused before anything changed, named by what it
# is) or, with --break-lock, moved aside and the run goes on; no report or console line carries a byte
# of another file or a control character. The FIFO made provision hang for over 659 s before.
LOCK = "/run/gpufleet/run-lock.json"
LEGACY = "/run/lock/gpufleet-run.json"
SECRET = "root-only-secret-5b1d9e"
REFUSED_WITHIN_S = 60
BROKEN_WITHIN_S = 180
_FORGED = (
    '{"id": "forged", "user": "\\u001b[2J\\u001b[Hroot", "command": "gpufleet gate", '
    '"controller": "x", "pid": 1, "started": "t0"}'
)
_OLDER = (
    '{"id": "old:1:1", "user": "carol", "command": "gpufleet gate", "controller": "old-laptop", '
    '"pid": 31337, "started": "2026-12-01T10:00:00+0000"}'
)
PLANTS = {
    # what was put there, and how the refusal names it
    "symlink": (
        f"printf %s {SECRET} > /root/secret && chmod 600 /root/secret && ln -s /root/secret {LOCK}",
        f"the node lock {LOCK} is a symbolic link",
    ),
    "FIFO": (f"mkfifo {LOCK}", f"the node lock {LOCK} is a FIFO"),
    "directory": (f"mkdir {LOCK}", f"the node lock {LOCK} is a directory"),
    "dangling symlink": (f"ln -s /nonexistent/gpufleet {LOCK}", f"the node lock {LOCK} is a symbolic link"),
    "forged record": (f"printf '%s' '{_FORGED}' > {LOCK}", "that is no lock record gpufleet wrote"),
    "older gpufleet's record": (
        f"mkdir -p /run/lock && printf '%s' '{_OLDER}' > {LEGACY}",
        f"held by gpufleet gate by carol on old-laptop (pid 31337, started 2026-12-01T10:00:00+0000): "
        f"another run is changing it (the lock {LEGACY} of an older gpufleet)",
    ),
}


def _provision(
    fleet: Fleet, tmp_path: Path, name: str, *extra: str
) -> tuple[int, dict[str, Any], str, float]:
    """`gpufleet provision` of one role (the lock is held for every tag) as an operator runs it: exit
    status, report.json, everything it printed and every report file's text, seconds it took."""
    report_dir = tmp_path / name
    env = dict(os.environ, GPUFLEET_STATE_DIR=str(tmp_path / "state"), PATH=PLAIN_PATH)
    env.pop("VIRTUAL_ENV", None)
    argv = [str(GPUFLEET), "provision", "--tags", "gpu_power", "--inventory", str(fleet.inventory_path)]
    argv += ["--vault-password-file", str(fleet.vault_password_file), "--report-dir", str(report_dir), *extra]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env, check=False)
    took = time.monotonic() - started
    files = "".join(p.read_text(encoding="utf-8") for p in sorted(report_dir.iterdir()) if p.is_file())
    report = json.loads((report_dir / "report.json").read_text())
    return done.returncode, report, done.stdout + done.stderr + files, took


# What was planted at the lock, as it was left: its entry (and a directory's entries), without a
# directory's ".." (/run/gpufleet itself, whose time moves with any run's files beside the lock: the minute
# ls shows then changed between the two listings now and then).
PLANTED = f"ls -la {LOCK} {LEGACY} 2>/dev/null | grep -v ' \\.\\.$'; true"


def _on_node(fleet: Fleet, command: str) -> str:
    return node_ssh(fleet, "127.0.71.2", command).stdout


@pytest.mark.parametrize("plant", list(PLANTS))
def test_what_is_left_at_the_node_lock_is_refused_at_once_and_cleared_by_break_lock(
    fleet: Fleet, tmp_path: Path, plant: str
) -> None:
    command, named = PLANTS[plant]
    _on_node(fleet, f"rm -rf {LOCK} {LOCK}.* {LEGACY} {LEGACY}.* && mkdir -p /run/gpufleet && {command}")
    before = _on_node(fleet, PLANTED)

    code, report, seen, took = _provision(fleet, tmp_path, "refused")
    host = report["hosts"]["node01"]
    assert code == 2, seen[-3000:]
    assert took < REFUSED_WITHIN_S, f"refused after {took:.0f} s"
    assert host["status"] == "failed" and host["configuration_error"] is True, host
    assert named in host["message"] and "--break-lock" in host["message"], host["message"]
    assert SECRET not in seen and "\x1b" not in seen
    assert _on_node(fleet, PLANTED) == before  # left as it was

    code, report, seen, took = _provision(fleet, tmp_path, "broken", "--break-lock")
    assert code == 0, seen[-3000:]
    assert took < BROKEN_WITHIN_S, f"--break-lock took {took:.0f} s"
    assert report["hosts"]["node01"]["status"] in ("ok", "changed"), report["hosts"]["node01"]
    assert SECRET not in seen and "\x1b" not in seen
    # moved aside, kept for whoever looks; the run's own lock given back
    aside = _on_node(fleet, f"ls -d {LOCK}.* {LEGACY}.* 2>/dev/null; true").split()
    assert len(aside) == 1 and ("stray" in aside[0] or "broken" in aside[0]), aside
    assert node_ssh(fleet, "127.0.71.2", f"test -e {LOCK} || test -L {LOCK}", check=False).returncode == 1
    if plant == "symlink":
        assert _on_node(fleet, "cat /root/secret") == SECRET
