"""`gpufleet watch --act` (the guardian, issue 39) on four serving simulated nodes with a real Slurm
(subnet 127.0.79): a node unsafe to serve is drained with a reason naming the failed check, its
instances stopped, remediated where the inventory opts in (a GPU reset, a reboot through the BMC's
Redfish ComputerSystem.Reset), gated and returned, or kept out and escalated to "replace hardware";
a circuit breaker bounds how many nodes it takes out; a leaf explains its links' failures; a node a
person drained or the gate blocked is left alone; --check changes nothing; a SIGTERM leaves the node
drained and named.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet
from gpufleet_sim.serving import ServingLoad, fleet_instance_urls

from tests.integration.conftest import (
    GATE_MARKERS,
    INSTANCES,
    node_ssh,
    run_on,
    serve_as_a_passed_gate_leaves,
)

SUBNET = "127.0.79"
NODES = ("node01", "node02", "node03", "node04")
RECORD = "/var/lib/gpufleet/drained"
HISTORY = "/var/lib/gpufleet/remediation-history.json"
# the breaker set wide for the tests of one node (each test has its own controller state); the breaker's
# own test narrows it on every node (its settings must agree across the fleet)
BASE = "gpufleet_drain_method: slurm\nguardian_breaker_max_nodes: 10\nguardian_breaker_max_percent: 100\n"
GPUFLEET = Path(sys.executable).parent / "gpufleet"


def address(name: str) -> str:
    return f"{SUBNET}.{int(name[4:]) + 1}"


def host_vars(fleet: Fleet, name: str, extra: str = "") -> None:
    (fleet.root / "host_vars" / f"{name}.yml").write_text(BASE + extra)


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    started: Fleet = fleet_factory(nodes=len(NODES), subnet=SUBNET, slurm=True)
    # serving first (the units and markers a passed gate leaves, no drain: drain_method none), then
    # Slurm is the nodes' drain method
    serve_as_a_passed_gate_leaves(started, list(NODES))
    (started.root / "host_vars").mkdir(exist_ok=True)
    for name in NODES:
        host_vars(started, name)
    return started


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test its own controller state (the breaker's file) and the nodes back in service after."""
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    yield


def back_in_service(fleet: Fleet, names: tuple[str, ...] = NODES) -> None:
    """What a passed gate leaves, without a gate: faults cleared, no drain record or history, Slurm
    resumed, the markers and both instances up. (An Xid stays in the kernel log until the node reboots:
    the tests that inject xid-79 reboot the node through the guardian, the others use faults that clear
    whole.)"""
    for name in names:
        control.fault(fleet, name, None, clear=True)
        host_vars(fleet, name)
        if "DRAIN" in fleet.slurm.node(name)["State"]:
            scontrol(fleet, "update", f"nodename={name}", "state=resume")
        start = [f"rm -f {RECORD} {HISTORY}", f"mkdir -p /run/gpufleet && touch {' '.join(GATE_MARKERS)}"]
        start += [f"systemctl start vllm-{i}.service" for i in INSTANCES]
        node_ssh(fleet, address(name), " && ".join(start))
    for name in names:
        fleet.slurm.wait_state(name, "IDLE", timeout=30)


def scontrol(fleet: Fleet, *argv: str) -> None:
    done = subprocess.run(
        ["scontrol", *argv], env=fleet.slurm.env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def act(fleet: Fleet, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    return run_on(fleet, report_dir, "watch", "--act", "--burn-in-seconds", "5", *extra)


def guardian(report: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(report["hosts"][name].get("guardian") or {})


def steps(report: dict[str, Any], name: str) -> list[tuple[str, str]]:
    return [(s["step"], s["outcome"]) for s in guardian(report, name).get("steps", [])]


def units(fleet: Fleet, name: str) -> dict[str, Any]:
    return dict(state.load(fleet.root / "nodes" / name).get("units", {}))


def history(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    done = node_ssh(fleet, address(name), f"cat {HISTORY}", check=False)
    return list(json.loads(done.stdout)["events"]) if done.returncode == 0 else []


def untouched(fleet: Fleet, name: str) -> tuple[Any, ...]:
    """What acting would change: Slurm's drains and the node's state there, the drain record, the units,
    the history, the host's power state at its BMC."""
    node = state.load(fleet.root / "nodes" / name)
    record = node_ssh(fleet, address(name), f"cat {RECORD}", check=False).stdout
    return (
        fleet.slurm.changes(name),
        fleet.slurm.node(name)["State"],
        record,
        node.get("units", {}),
        history(fleet, name),
        node.get("power", {}),
        [(g["uuid"], g["persistence_mode"]) for g in node["gpus"]],
    )


def test_check_changes_nothing_and_says_what_it_would_do(fleet: Fleet, tmp_path: Path) -> None:
    host_vars(fleet, "node01", "guardian_remediation: {nvlink: reboot}\n")
    control.fault(fleet, "node01", "nvlink-down", clear=False)
    before = {name: untouched(fleet, name) for name in NODES}
    try:
        code, report = act(fleet, tmp_path / "check", "--check")
        after = {name: untouched(fleet, name) for name in NODES}
    finally:
        back_in_service(fleet, ("node01",))
    assert code == 1
    assert after == before
    found = guardian(report, "node01")
    assert found["decision"] == "would_quarantine" and found["remediation"] == "reboot", found
    assert "health.nvlink" in found["reason"], found
    assert steps(report, "node01") == [("quarantine", "would")]
    assert report["guardian"]["check"] is True
    for name in ("node02", "node03", "node04"):
        assert guardian(report, name) == {}, name


def test_a_gpu_off_the_bus_is_quarantined_rebooted_gated_and_returned(fleet: Fleet, tmp_path: Path) -> None:
    host_vars(fleet, "node01", "guardian_remediation: {gpu_lost: reboot}\n")
    control.fault(fleet, "node01", "xid-79", clear=False)
    try:
        code, report = act(fleet, tmp_path / "act")
        drains = fleet.slurm.changes("node01")
        events = history(fleet, "node01")
        state_now = fleet.slurm.node("node01")["State"]
    finally:
        back_in_service(fleet, ("node01",))
    found = guardian(report, "node01")
    assert found["decision"] == "returned", json.dumps(found)
    assert [s for s, _ in steps(report, "node01")] == ["quarantine", "reboot", "gate", "return"]
    assert all(outcome == "ok" for _, outcome in steps(report, "node01")), steps(report, "node01")
    assert all(s["started"] and s["finished"] for s in found["steps"]), found["steps"]
    # the OS acted on the BMC's GracefulRestart: no forced reset
    reboot = next(s for s in found["steps"] if s["step"] == "reboot")
    assert "GracefulRestart sent" in reboot["message"] and "ForceRestart" not in reboot["message"], reboot
    # drained with a reason naming the failed check, then resumed by the gate
    assert drains[0]["state"] == "drain" and "health.gpu_count" in str(drains[0]["reason"]), drains
    assert drains[-1]["state"] == "resume" and "DRAIN" not in state_now, (drains, state_now)
    # each class the node failed in keeps its own record (escalation counts per class)
    assert [e["action"] for e in events if e["class"] == "gpu_lost"] == [
        "quarantine",
        "reboot",
        "gate_passed",
    ]
    assert [e["action"] for e in events if e["class"] == "xid"] == ["quarantine", "reboot"], events
    assert code == 0 or report["hosts"]["node01"]["status"] == "changed", report["summary"]


def test_a_pending_row_remap_is_reset_then_escalated_when_it_persists(fleet: Fleet, tmp_path: Path) -> None:
    """A pending remap: reset, gated, returned. The same fault persisting: reset again, the gate fails, and
    the second reset of row_remap within the window is "replace hardware": drained, never undrained,
    never remediated again (a third run leaves it alone)."""
    host_vars(fleet, "node02", "guardian_remediation: {row_remap: gpu_reset}\n")
    try:
        control.fault(fleet, "node02", "row-remap-pending", clear=False)
        code, first = act(fleet, tmp_path / "once")
        assert code == 0, first["summary"]
        assert guardian(first, "node02")["decision"] == "returned", json.dumps(guardian(first, "node02"))
        assert [s for s, _ in steps(first, "node02")] == ["quarantine", "gpu_reset", "gate", "return"]
        reset = next(s for s in guardian(first, "node02")["steps"] if s["step"] == "gpu_reset")
        assert "nvidia-smi -r" in reset["message"], reset

        # the hardware's row cannot be remapped: every reset leaves it pending again
        control.fault(fleet, "node02", "row-remap-pending-persistent", clear=False)
        code, second = act(fleet, tmp_path / "twice")
        replaced = guardian(second, "node02")
        code_third, third = act(fleet, tmp_path / "thrice")
        events = history(fleet, "node02")
        drained = fleet.slurm.node("node02")
        changes = fleet.slurm.changes("node02")
    finally:
        back_in_service(fleet, ("node02",))
    assert code == 1 and code_third == 1
    assert replaced["decision"] == "replace_hardware", json.dumps(replaced)
    assert [s for s, _ in steps(second, "node02")][:3] == ["quarantine", "gpu_reset", "gate"]
    assert ("gate", "failed") in steps(second, "node02")
    assert guardian(third, "node02")["decision"] == "left_alone", json.dumps(guardian(third, "node02"))
    row_remap = [e["action"] for e in events if e["class"] == "row_remap"]
    assert row_remap.count("gpu_reset") == 2 and row_remap[-1] == "replace_hardware", events
    # out of service since the second run's drain: never resumed after it
    assert "DRAIN" in drained["State"] and changes[-1]["state"] == "drain", changes
    prom = (tmp_path / "thrice" / "gpufleet.prom").read_text()
    assert 'gpufleet_node_replace_hardware{host="node02"' in prom


def test_a_breaker_of_one_takes_out_one_node_of_three_failing(fleet: Fleet, tmp_path: Path) -> None:
    for name in NODES:
        (fleet.root / "host_vars" / f"{name}.yml").write_text(
            "gpufleet_drain_method: slurm\nguardian_breaker_max_nodes: 1\n"
        )
    for name in ("node01", "node02", "node03"):
        control.fault(fleet, name, "nvlink-down", clear=False)
    try:
        code, report = act(fleet, tmp_path / "act")
        drained = {name: fleet.slurm.node(name)["State"] for name in NODES}
    finally:
        back_in_service(fleet)
    assert code == 1
    decisions = {name: guardian(report, name).get("decision") for name in NODES}
    assert sorted(d for d in decisions.values() if d) == [
        "quarantined",
        "would_quarantine",
        "would_quarantine",
    ]
    assert decisions["node04"] is None
    assert [n for n, s in drained.items() if "DRAIN" in s] == [
        n for n, d in decisions.items() if d == "quarantined"
    ]
    breaker = report["guardian"]["breaker"]
    assert breaker["open"] is True and breaker["limit"] == 1, breaker
    prom = (tmp_path / "act" / "gpufleet.prom").read_text()
    assert 'gpufleet_guardian_breaker_open{command="watch"} 1' in prom, prom[-2000:]


def test_a_leaf_without_pfc_is_named_and_no_node_is_taken_out(fleet: Fleet, tmp_path: Path) -> None:
    urls = fleet_instance_urls(fleet.root)
    before = {name: untouched(fleet, name) for name in NODES}
    assert control.fault(fleet, "leaf02", "switch-pfc-off", clear=False) == ["switch-pfc-off"]
    try:
        with ServingLoad(urls, concurrency=4) as load:
            code, report = act(fleet, tmp_path / "act")
        after = {name: untouched(fleet, name) for name in NODES}
    finally:
        control.fault(fleet, "leaf02", None, clear=True)
    assert load.ok > 0 and code == 1
    assert after == before
    assert "leaf02" in report["guardian"]["leaves"], report["guardian"]
    assert "pfc" in report["guardian"]["leaves"]["leaf02"].lower()
    assert all(guardian(report, n).get("decision") in (None, "fabric") for n in NODES)


def test_a_node_a_person_drained_or_the_gate_blocked_is_left_alone(fleet: Fleet, tmp_path: Path) -> None:
    scontrol(fleet, "update", "nodename=node03", "state=drain", "reason=RMA 1234 fan")
    node_ssh(
        fleet, address("node04"), f"mkdir -p /var/lib/gpufleet && echo 'slurm: gpufleet gate: x' > {RECORD}"
    )
    for name in ("node03", "node04"):
        control.fault(fleet, name, "nvlink-down", clear=False)
    before = {name: untouched(fleet, name) for name in ("node03", "node04")}
    try:
        code, report = act(fleet, tmp_path / "act")
        after = {name: untouched(fleet, name) for name in ("node03", "node04")}
    finally:
        back_in_service(fleet, ("node03", "node04"))
    assert code == 1 and after == before
    for name in ("node03", "node04"):
        assert guardian(report, name)["decision"] == "left_alone", guardian(report, name)


def test_sigterm_during_the_reboot_wait_leaves_the_node_drained_and_named(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The node's OS ignores the BMC's GracefulRestart (a shutdown stuck on its driver): the reboot waits
    the graceful timeout, then forces it. A SIGTERM during that wait: the reboot under way finishes (the
    forced restart named), no gate starts, the node stays drained and the report says where it stopped."""
    host_vars(
        fleet,
        "node04",
        "guardian_remediation: {gpu_lost: reboot}\nguardian_reboot_graceful_timeout_s: 10\n",
    )
    control.fault(fleet, "node04", "xid-79", clear=False)
    control.fault(fleet, "node04", "graceful-ignored", clear=False)
    argv = [str(GPUFLEET), "watch", "--act", "--verbose", "--burn-in-seconds", "5"]
    argv += [
        "--inventory",
        str(fleet.inventory_path),
        "--vault-password-file",
        str(fleet.vault_password_file),
    ]
    argv += ["--report-dir", str(tmp_path / "act")]
    env = dict(os.environ, GPUFLEET_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            # the task before the reboot: the reboot starts next and waits for the node to go down
            if "Quarantine: record it in the node's history" in line:
                break
        time.sleep(4)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
        report = json.loads((tmp_path / "act" / "report.json").read_text())
        drained = fleet.slurm.node("node04")["State"]
        events = history(fleet, "node04")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        back_in_service(fleet, ("node04",))
    output = "".join(seen) + out
    assert proc.returncode == 1, output[-3000:]
    assert "DRAIN" in drained, output[-3000:]
    found = guardian(report, "node04")
    assert found["decision"] == "kept_out", json.dumps(found)
    taken = {s["step"]: s for s in found["steps"]}
    assert taken["reboot"]["outcome"] == "ok" and "ForceRestart" in taken["reboot"]["message"], taken
    assert taken["gate"]["outcome"] == "stopped" and "SIGTERM" in taken["gate"]["message"], taken
    assert "asked to stop by SIGTERM" in report["interrupted"]
    assert [e["action"] for e in events if e["class"] == "gpu_lost"] == ["quarantine", "reboot"], events
