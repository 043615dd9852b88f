"""`gpufleet switch` stopped by two signals while the leaves are being changed (each PATCH answered
slowly: sim/faults_switch.py's switch-slow-patch): no file under ~/.ansible/tmp, nor the temp dir,
holds a leaf's NVUE password (the action plugin keeps the module's arguments on a pipe), and no
revision the run made is left pending on a leaf (the module settles it on SIGTERM)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpufleet_sim import control, nvue_state
from gpufleet_sim.fleet import Fleet

GPUFLEET = Path(sys.executable).parent / "gpufleet"
LEAVES = ("leaf01", "leaf02")


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=1, subnet="127.0.86")
    for leaf in LEAVES:
        assert control.fault(started, leaf, "switch-ecn-off", clear=False) == ["switch-ecn-off"]
        assert control.fault(started, leaf, "switch-slow-patch", clear=False) == ["switch-slow-patch"]
    return started


@pytest.fixture
def temp() -> Iterator[Path]:
    """The run's own temp dir; not under tmp_path, which under xdist is too long for ansible-playbook's
    socket (workdir.check_temp_dir)."""
    path = Path(tempfile.mkdtemp(prefix="gpufleet-switch-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _holding(root: Path, secrets: list[str]) -> list[str]:
    """Every file under ``root`` with one of ``secrets`` in it (a zip's members read unpacked)."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        blobs = [path.read_bytes()]
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                blobs += [archive.read(name) for name in archive.namelist()]
        if any(secret.encode() in blob for secret in secrets for blob in blobs):
            found.append(str(path))
    return found


def _revisions(fleet: Fleet, leaf: str) -> dict[str, str]:
    return {r: v["state"] for r, v in nvue_state.load(fleet.leaf_state(leaf))["revisions"].items()}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_switch_run_leaves_no_password_on_disk_and_no_pending_revision(
    fleet: Fleet, tmp_path: Path, temp: Path, signum: signal.Signals
) -> None:
    secrets = [fleet.switch_credentials(leaf)[1] for leaf in LEAVES]
    # ansible's ~ is the account's home whatever HOME says; the temp dir is this run's alone
    ansible_tmp = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ansible" / "tmp"
    env = dict(os.environ, TMPDIR=str(temp), GPUFLEET_STATE_DIR=str(tmp_path / "state"))
    argv = [str(GPUFLEET), "switch", "--inventory", str(fleet.inventory_path)]
    argv += [
        "--vault-password-file",
        str(fleet.vault_password_file),
        "--report-dir",
        str(tmp_path / "report"),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        # a revision is made and its PATCH is being answered (slowly): the change is under way
        while not any(_revisions(fleet, leaf) for leaf in LEAVES):
            if proc.poll() is not None:
                said = proc.communicate()[0][-4000:]
                pytest.fail(f"the run ended (exit {proc.returncode}) before changing a leaf:\n{said}")
            assert time.monotonic() < deadline, "no leaf was changed in 300 s"
            time.sleep(0.1)
        made = {leaf: list(_revisions(fleet, leaf)) for leaf in LEAVES}
        proc.send_signal(signum)
        time.sleep(0.5)
        proc.send_signal(signum)  # the second: stop now
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, output[-2000:]
    assert f"{signum.name} again: stopping the running playbook now" in output
    time.sleep(6)  # procs.stop_marked's grace: whatever the stop left running has ended by now
    # the secrets are this fleet's own: any file holding one was written by this run
    assert _holding(ansible_tmp, secrets) == [] and _holding(temp, secrets) == []
    payloads = Path(tempfile.gettempdir()).glob("ansible_gpufleet.node.switch_qos_payload_*")
    assert [found for path in payloads for found in _holding(path, secrets)] == []
    for leaf in LEAVES:
        left = _revisions(fleet, leaf)
        assert [r for r, state in left.items() if state not in ("applied", "apply")] == [], (leaf, made, left)
