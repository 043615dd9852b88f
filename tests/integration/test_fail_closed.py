"""Fail closed around the drain, on two simulated Slurm nodes and their two leaves (subnet 127.0.88).

drift --fix never claims a leaf it did not change (the leaves are left to `gpufleet switch`, and said
so); what needs no change - the role inputs against the node, its BMC's CA, its fabric and whether its
leaves can be read - is judged before the drain, so a node that cannot pass it is never drained
(scheduler, drain record and units as they were) and is named with why; the drain record is written
before the scheduler is asked, so a controller killed around the drain leaves a node drift names, by
its record or by its Slurm reason; drift --fix returns a node a run left drained; and the run lock
lives on the node, so a second controller (another state directory) is refused naming the holder,
and a dead holder's lock is broken only with --break-lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, nvue_state, state
from gpufleet_sim.fleet import Fleet

from gpufleet import cli
from tests.integration.conftest import (
    GATE_MARKERS,
    INSTANCES,
    node_ssh,
    run_on,
    serve_as_a_passed_gate_leaves,
)

GPUFLEET = Path(sys.executable).parent / "gpufleet"
SUBNET = "127.0.88"
RECORD = "/var/lib/gpufleet/drained"
LOCK = "/run/gpufleet/run-lock.json"
SLURM = "gpufleet_drain_method: slurm\n"


@pytest.fixture(scope="module")
def fleet(fleet_factory) -> Fleet:
    started: Fleet = fleet_factory(nodes=2, subnet=SUBNET, slurm=True)
    host_vars = started.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    for name in ("node01", "node02"):
        (host_vars / f"{name}.yml").write_text(SLURM)
    return started


def address(name: str) -> str:
    return f"{SUBNET}.{int(name[4:]) + 1}"


def host_vars(fleet: Fleet, name: str, extra: str = "") -> None:
    (fleet.root / "host_vars" / f"{name}.yml").write_text(SLURM + extra)


def node_state(fleet: Fleet, name: str) -> dict[str, Any]:
    return state.load(fleet.root / "nodes" / name)


def untouched(fleet: Fleet, name: str) -> tuple[Any, ...]:
    """What a drain or a gate would change: the real Slurm's drains and resumes and the node's state
    there, the drain record, the units."""
    node = node_state(fleet, name)
    record = node_ssh(fleet, address(name), f"cat {RECORD}", check=False).stdout
    return (fleet.slurm.changes(name), fleet.slurm.node(name)["State"], record, node.get("units", {}))


def left_drained(report: dict[str, Any], name: str) -> list[Any]:
    return [c["value"] for c in report["hosts"][name]["checks"] if c["name"] == "drain.left_drained"]


def test_drift_fix_leaves_the_leaves_to_switch_and_never_says_fixed(fleet: Fleet, tmp_path: Path) -> None:
    """ECN off on leaf01, PFC off on leaf02, node02's power capped: the leaves stay drifted and unchanged
    (named with the command that fixes them); node02, whose links those leaves carry, is not drained."""
    control.fault(fleet, "leaf01", "switch-ecn-off", clear=False)
    control.fault(fleet, "leaf02", "switch-pfc-off", clear=False)
    control.fault(fleet, "node02", "power-capped", clear=False)
    leaves = {leaf: nvue_state.load(fleet.leaf_state(leaf)) for leaf in ("leaf01", "leaf02")}
    before = untouched(fleet, "node02")
    try:
        code, report = run_on(fleet, tmp_path, "drift", "--fix", "--batch", "1")
        after = {leaf: nvue_state.load(fleet.leaf_state(leaf)) for leaf in ("leaf01", "leaf02")}
    finally:
        control.fault(fleet, "leaf01", None, clear=True)
        control.fault(fleet, "leaf02", None, clear=True)
    assert code == 1
    for leaf in ("leaf01", "leaf02"):
        host = report["hosts"][leaf]
        assert host["status"] == "drifted" and host["changes"], host
        assert "fixed" not in host["message"] and f"gpufleet switch --limit {leaf}" in host["message"], host
        # no revision made, nothing applied
        assert after[leaf] == leaves[leaf], leaf
    node02 = report["hosts"]["node02"]
    assert node02["status"] == "failed" and node02["changes"], node02
    assert node02["message"].startswith("not fixed, left out of the rollout: its fabric fails fabric.switch_")
    assert untouched(fleet, "node02") == before


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        pytest.param("gpu_power_limit_w: 1500\n", "1500", id="power-beyond-range"),
        pytest.param(
            "gpu_pinning_instances:\n  - {name: glm52, nvlink_domain: 7}\n"
            "  - {name: kimik3, nvlink_domain: 1}\n",
            "NVLink domain 7 does not exist",
            id="nvlink-domain-7",
        ),
    ],
)
def test_inputs_the_node_cannot_meet_are_refused_before_the_drain(
    fleet: Fleet, tmp_path: Path, extra: str, named: str
) -> None:
    """Exit 2 from the gate and from drift --fix, the node never drained (node01 drifted too, so that
    drift --fix would target it)."""
    control.fault(fleet, "node01", "power-capped", clear=False)
    host_vars(fleet, "node01", extra)
    before = untouched(fleet, "node01")
    try:
        fixed = run_on(fleet, tmp_path / "fix", "drift", "--fix", "--limit", "node01")
        gated = run_on(fleet, tmp_path / "gate", "gate", "--limit", "node01", "--burn-in-seconds", "3")
    finally:
        host_vars(fleet, "node01")
        control.fault(fleet, "node01", "power-capped", clear=True)
    for code, report in (fixed, gated):
        host = report["hosts"]["node01"]
        assert code == cli.EXIT_USAGE, host
        assert host["configuration_error"] is True and named in host["message"], host
        assert "left drained" not in host["message"], host
    assert fixed[1]["hosts"]["node01"]["message"].startswith("not fixed, left out of the rollout: ")
    # refused, never called blocked (GateBlocked says a blocked node was drained and stopped)
    assert gated[1]["hosts"]["node01"]["status"] == "failed"
    assert "refused before the drain: left as it was" in gated[1]["hosts"]["node01"]["message"]
    assert untouched(fleet, "node01") == before


@pytest.mark.parametrize("ca", ["missing", "garbage"])
def test_a_bad_bmc_ca_is_refused_before_the_drain(fleet: Fleet, tmp_path: Path, ca: str) -> None:
    path = tmp_path / "bmc-ca.pem"
    if ca == "garbage":
        path.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    host_vars(fleet, "node01", f"gpufleet_bmc_ca_path: {path}\n")
    before = untouched(fleet, "node01")
    try:
        code, report = run_on(fleet, tmp_path / "gate", "gate", "--limit", "node01", "--burn-in-seconds", "3")
    finally:
        host_vars(fleet, "node01")
    host = report["hosts"]["node01"]
    assert code == cli.EXIT_USAGE, host
    assert host["configuration_error"] is True and f"CA file {path}" in host["message"], host
    assert "refused before the drain: left as it was" in host["message"], host
    assert untouched(fleet, "node01") == before


def test_a_leaf_that_is_down_drains_no_node(fleet: Fleet, tmp_path: Path) -> None:
    control.fault(fleet, "node02", "power-capped", clear=False)
    control.fault(fleet, "leaf02", "switch-down", clear=False)
    before = untouched(fleet, "node02")
    try:
        code, report = run_on(fleet, tmp_path, "drift", "--fix", "--limit", "node02")
    finally:
        control.fault(fleet, "leaf02", "switch-down", clear=True)
    assert code == 1
    message = report["hosts"]["node02"]["message"]
    assert message.startswith(
        "not fixed, left out of the rollout: its fabric fails fabric.switch_read[leaf02]"
    )
    assert untouched(fleet, "node02") == before


def _gpufleet(tmp_path: Path, name: str, *argv: str, fleet: Fleet) -> subprocess.Popen[str]:
    """gpufleet as its own controller process: its own state directory, --verbose task lines."""
    command = [str(GPUFLEET), *argv, "--verbose", "--inventory", str(fleet.inventory_path)]
    command += ["--vault-password-file", str(fleet.vault_password_file), "--report-dir", str(tmp_path / name)]
    env = dict(os.environ, GPUFLEET_STATE_DIR=str(tmp_path / f"state-{name}"))
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )


def _report(tmp_path: Path, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((tmp_path / name / "report.json").read_text())
    return loaded


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _ssh(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"ssh")
    except OSError:
        return False


def _signal_tree(proc: subprocess.Popen[str], number: int) -> None:
    """The controller and every process it started; a pause spares the ssh masters, which another
    controller's ssh may share."""
    for pid in [proc.pid, *_descendants(proc.pid)]:
        if number == signal.SIGSTOP and _ssh(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)


def _until(proc: subprocess.Popen[str], text: str, seen: list[str]) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        seen.append(line)
        if text in line:
            return
        assert time.monotonic() < deadline, "".join(seen[-20:])
    raise AssertionError(f"{text!r} never came: {''.join(seen[-30:])}")


def test_a_second_controller_is_refused_naming_the_holder(fleet: Fleet, tmp_path: Path) -> None:
    """Controller A holds node01 (its drift --fix paused right after it took the lock); controller B,
    another state directory, runs drift --fix on node01 and is refused naming A, node01 untouched by it;
    A then finishes."""
    control.fault(fleet, "node01", "power-capped", clear=False)
    first = _gpufleet(tmp_path, "a", "drift", "--fix", "--limit", "node01", fleet=fleet)
    seen: list[str] = []
    try:
        _until(first, "Hold the node for this run", seen)
        _signal_tree(first, signal.SIGSTOP)
        before = untouched(fleet, "node01")
        holder = json.loads(node_ssh(fleet, address("node01"), f"cat {LOCK}").stdout)
        second = _gpufleet(tmp_path, "b", "drift", "--fix", "--limit", "node01", fleet=fleet)
        output = second.communicate(timeout=600)[0]
        # refused before anything changed on it: exit 2, as a refused input
        assert second.returncode == 2, output[-3000:]
        assert untouched(fleet, "node01") == before
    finally:
        _signal_tree(first, signal.SIGCONT)
    rest = first.communicate(timeout=600)[0]
    assert first.returncode == 0, "".join(seen) + rest
    refused = _report(tmp_path, "b")["hosts"]["node01"]
    assert refused["status"] == "failed", refused
    assert (
        f"held by gpufleet drift --fix by {holder['user']} on {holder['controller']} (pid {first.pid}"
        in (refused["message"])
    ), refused
    assert "refused before the drain" in refused["message"] and "--break-lock" in refused["message"]
    assert holder["pid"] == first.pid and holder["command"] == "gpufleet drift --fix"
    assert _report(tmp_path, "a")["hosts"]["node01"]["status"] == "changed"
    # A gave the node back
    assert node_ssh(fleet, address("node01"), f"test -e {LOCK}", check=False).returncode == 1
    fleet.slurm.wait_state("node01", "IDLE")


def test_a_killed_controller_leaves_a_node_drift_names_and_fix_returns(fleet: Fleet, tmp_path: Path) -> None:
    """Killed (SIGKILL, every process of it) right after the drain record: drift names node02 (by its
    record, or by Slurm's reason once the record is gone); its lock names the dead run and is broken
    only with --break-lock; then drift --fix fixes and returns it."""
    control.fault(fleet, "node02", "power-capped", clear=False)
    killed = _gpufleet(tmp_path, "killed", "drift", "--fix", "--limit", "node02", fleet=fleet)
    seen: list[str] = []
    _until(killed, "Record on the node that gpufleet took it out of service", seen)
    _signal_tree(killed, signal.SIGKILL)
    killed.wait(timeout=60)
    time.sleep(3)  # what the killed run's workers had under way ends

    code, drift = run_on(fleet, tmp_path / "drift", "drift", "--limit", "node02")
    assert code == 1
    assert left_drained(drift, "node02") == ["slurm: gpufleet drift --fix"]
    # the record lost: Slurm's reason names it (drained by hand here if the kill came first)
    node_ssh(fleet, address("node02"), f"rm -f {RECORD}")
    if "DRAIN" not in fleet.slurm.node("node02")["State"]:
        node_ssh(
            fleet,
            address("node02"),
            "scontrol update nodename=node02 state=drain 'reason=gpufleet drift --fix'",
        )
    code, drift = run_on(fleet, tmp_path / "drift-slurm", "drift", "--limit", "node02")
    assert code == 1
    assert left_drained(drift, "node02") == ["slurm: gpufleet drift --fix"]
    assert "no drain record" in drift["hosts"]["node02"]["message"] or any(
        "no drain record" in c["message"] for c in drift["hosts"]["node02"]["checks"]
    )

    # the dead run's lock: refused naming it, then broken on purpose
    code, refused = run_on(fleet, tmp_path / "refused", "drift", "--fix", "--limit", "node02")
    assert code == 2
    assert f"(pid {killed.pid}," in refused["hosts"]["node02"]["message"], refused["hosts"]["node02"]
    code, fixed = run_on(fleet, tmp_path / "fix", "drift", "--fix", "--break-lock", "--limit", "node02")
    assert code == 0, fixed["hosts"]["node02"]
    assert fixed["hosts"]["node02"]["message"] == "fixed in batch 1"
    fleet.slurm.wait_state("node02", "IDLE")
    assert node_ssh(fleet, address("node02"), f"test -e {RECORD}", check=False).returncode == 1


def test_drift_fix_returns_a_node_left_drained_with_nothing_drifted(fleet: Fleet, tmp_path: Path) -> None:
    """An interrupted rollout fixed node02's settings and stopped before returning it: only
    drain.left_drained is left. drift --fix re-judges it and returns it to service."""
    node_ssh(
        fleet,
        address("node02"),
        f"mkdir -p /var/lib/gpufleet && echo 'slurm: gpufleet drift --fix' > {RECORD} && "
        "scontrol update nodename=node02 state=drain 'reason=gpufleet drift --fix'",
    )
    code, drift = run_on(fleet, tmp_path / "drift", "drift", "--limit", "node02")
    assert code == 1
    assert drift["hosts"]["node02"]["changes"] == [] and left_drained(drift, "node02")
    code, fixed = run_on(fleet, tmp_path / "fix", "drift", "--fix", "--limit", "node02")
    host = fixed["hosts"]["node02"]
    assert code == 0, host
    assert host["status"] == "changed" and host["message"].startswith("returned to service in batch 1"), host
    fleet.slurm.wait_state("node02", "IDLE")
    assert node_ssh(fleet, address("node02"), f"test -e {RECORD}", check=False).returncode == 1
    code, again = run_on(fleet, tmp_path / "again", "drift", "--limit", "node02")
    assert code == 0 and again["hosts"]["node02"]["status"] == "ok", again["hosts"]["node02"]


def test_a_cabling_fault_on_a_serving_node_blocks_it_drained_and_stopped(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Issue 36 item 4: node02 serves as a passed gate leaves it (instances up, both markers); two of
    its RoCE ports trade cables. The gate judges the cabling before the drain and blocks the node as at
    any later step: drained in Slurm, its instances stopped, both markers withdrawn (it was reported
    blocked and left serving with the earlier gate's marker). Last in this module: node02 is returned
    after."""
    (fleet.root / "host_vars" / "node02.yml").write_text("")  # served without a scheduler's drain
    serve_as_a_passed_gate_leaves(fleet, ["node02"])
    host_vars(fleet, "node02")
    assert _serving(fleet, "node02") == ([True, True], sorted(GATE_MARKERS))
    drains = len(fleet.slurm.changes("node02"))
    control.fault(fleet, "node02", "cable-swapped", clear=False)
    try:
        code, report = run_on(fleet, tmp_path / "gate", "gate", "--limit", "node02", "--burn-in-seconds", "3")
    finally:
        control.fault(fleet, "node02", "cable-swapped", clear=True)
    host = report["hosts"]["node02"]
    assert code == 1, host
    assert host["status"] == "blocked" and not host.get("configuration_error"), host
    crossed = [c for c in host["checks"] if not c["ok"] and c["name"].startswith("fabric.neighbor[")]
    assert len(crossed) == 2 and all("crossed with" in c["message"] for c in crossed), host["checks"]
    assert "; left drained" in host["message"] and "left as it was" not in host["message"], host["message"]
    assert _serving(fleet, "node02") == ([False, False], [])
    changes = [(c["state"], c["reason"]) for c in fleet.slurm.changes("node02")[drains:]]
    assert changes == [("drain", "gpufleet gate (post-maintenance)")]
    assert "DRAIN" in fleet.slurm.node("node02")["State"]
    node_ssh(fleet, address("node02"), f"rm -f {RECORD} && scontrol update nodename=node02 state=resume")


def _serving(fleet: Fleet, name: str) -> tuple[list[bool], list[str]]:
    """Its vLLM units active, and the gate's markers it keeps."""
    units = node_state(fleet, name).get("units", {})
    active = [bool(units.get(f"vllm-{i}.service", {}).get("active")) for i in INSTANCES]
    markers = node_ssh(fleet, address(name), "ls " + " ".join(GATE_MARKERS), check=False).stdout.split()
    return active, sorted(markers)
