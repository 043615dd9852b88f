"""`gpufleet gate` on a simulated fleet: the post-maintenance checklist fails closed, per node (every
simulator fault, a weak loop, a prefix-cache cliff and bad BMC credentials: test_gate_faults.py)."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpufleet.sim import control, state, tools
from gpufleet.sim.fleet import Fleet
from tests.integration.conftest import run_on

BURN_IN_SECONDS = "20"
# how the gate drains a Slurm node (scontrol argv after the node name)
DRAIN = ["state=drain", "reason=gpufleet gate (post-maintenance)"]
RUN_A = {"node01": "127.0.33.2", "node02": "127.0.33.3", "node03": "127.0.33.4", "node04": "127.0.33.5"}


# nvidia-smi -q -x calls per node during each gate run, counted from the simulator's call log.
FULL_READS: dict[str, dict[str, int]] = {}


def _full_reads(fleet: Fleet) -> dict[str, int]:
    """How many times each node's nvidia-smi was asked for -q -x so far (the simulator's call log)."""
    return {
        node.name: sum(1 for argv in tools.calls(node, "nvidia-smi") if "-q" in argv and "-x" in argv)
        for node in sorted((fleet.root / "nodes").iterdir())
        if node.is_dir()
    }


def _gate(fleet: Fleet, report_dir: Path) -> tuple[int, dict[str, Any]]:
    before = _full_reads(fleet)
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", BURN_IN_SECONDS)
    FULL_READS[str(report_dir)] = {name: n - before.get(name, 0) for name, n in _full_reads(fleet).items()}
    return code, report


def _failed(host: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [c for c in host["checks"] if not c["ok"] and c["name"].startswith(prefix)]


def _instances_active(fleet: Fleet, name: str) -> list[bool]:
    units = state.load(fleet.root / "nodes" / name).get("units", {})
    return [bool(units.get(f"vllm-{i}.service", {}).get("active")) for i in ("glm52", "kimik3")]


def _answers(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


def _scheduler_calls(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    """What the node's stand-in `scontrol` was asked, in order: argv and time."""
    calls: list[dict[str, Any]] = state.load(fleet.root / "nodes" / name).get("scheduler_calls", [])
    return calls


def _mtime(fleet: Fleet, name: str, path: str) -> float:
    """When a file on the node was last written (its own /run), read over the node's ssh."""
    argv = ["ssh", "-i", str(fleet.client_key), "-o", f"UserKnownHostsFile={fleet.known_hosts}"]
    argv += ["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", "2222", f"root@{RUN_A[name]}"]
    out = subprocess.run([*argv, "stat", "-c", "%.6Y", path], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return float(out.stdout)


@pytest.fixture(scope="module")
def run_a(fleet_factory, tmp_path_factory) -> tuple[Fleet, int, dict[str, Any], Path]:
    """healthy, low coolant flow, a hot GPU, a BMC that is down: one gate run, the nodes in Slurm."""
    fleet: Fleet = fleet_factory(nodes=4, subnet="127.0.33")
    # the nodes are Slurm nodes: drained before the gate, resumed only when they pass it
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    for name in RUN_A:
        (host_vars / f"{name}.yml").write_text("gpufleet_drain_method: slurm\n")
    control.fault(fleet, "node02", "low-coolant-flow", clear=False)
    control.fault(fleet, "node03", "hot-gpu", clear=False)
    control.fault(fleet, "node04", "bmc-down", clear=False)
    # ...and a PDU-capped power limit the gate re-asserts: gpu_power sets it and reads it back.
    control.fault(fleet, "node04", "power-capped", clear=False)
    report_dir = tmp_path_factory.mktemp("gate-a")
    code, report = _gate(fleet, report_dir)
    return fleet, code, report, report_dir


def test_healthy_node_passes_and_serves(run_a) -> None:
    fleet, code, report, _ = run_a
    host = report["hosts"]["node01"]
    assert host["status"] == "ok", host
    assert [c["name"] for c in host["checks"] if not c["ok"]] == []
    assert any(c["name"].startswith("burn_in.") for c in host["checks"])
    assert _instances_active(fleet, "node01") == [True, True]
    assert (
        _answers("http://127.0.33.2:8000/health") == 200 and _answers("http://127.0.33.2:8001/health") == 200
    )
    assert code == 1  # the other nodes are blocked


def test_healthy_node_is_drained_first_and_resumed_only_after_passing(run_a) -> None:
    fleet, _, report, _ = run_a
    calls = _scheduler_calls(fleet, "node01")
    assert [c["argv"] for c in calls] == [
        ["update", "nodename=node01", *DRAIN],
        ["update", "nodename=node01", "state=resume"],
    ]
    drained, resumed = calls[0]["time"], calls[1]["time"]
    # the instances may start only after the thermal gate; the node passed only after the burn-in
    started = _mtime(fleet, "node01", "/run/gpufleet/thermal-gate-passed")
    passed = _mtime(fleet, "node01", "/run/gpufleet/gate-passed")
    assert drained < started < passed < resumed
    assert state.load(fleet.root / "nodes" / "node01")["slurm_state"] == "IDLE"
    assert "drained" not in report["hosts"]["node01"].get("message", "")


def test_blocked_nodes_are_drained_and_never_resumed(run_a) -> None:
    fleet, _, report, _ = run_a
    for name in ("node02", "node03", "node04"):
        argv = [c["argv"] for c in _scheduler_calls(fleet, name)]
        assert argv == [["update", f"nodename={name}", *DRAIN]], name
        assert state.load(fleet.root / "nodes" / name)["slurm_state"] == "IDLE+DRAIN"
        host = report["hosts"][name]
        assert host["status"] == "blocked" and host["message"].endswith("; left drained"), host["message"]


def test_low_flow_blocks_before_start_naming_reading_and_limit(run_a) -> None:
    fleet, _, report, _ = run_a
    host = report["hosts"]["node02"]
    assert host["status"] == "blocked"
    flow = _failed(host, "coolant.flow_lpm")
    assert flow and all(c["limit"] == 8 and c["value"] < 8 for c in flow)
    assert not any(c["name"].startswith("burn_in.") for c in host["checks"])
    assert _instances_active(fleet, "node02") == [False, False]


def test_hot_gpu_blocks_before_start(run_a) -> None:
    fleet, _, report, _ = run_a
    host = report["hosts"]["node03"]
    assert host["status"] == "blocked"
    hot = _failed(host, "thermal.gpu_temp_c")
    assert len(hot) == 1 and hot[0]["value"] > hot[0]["limit"]
    assert _instances_active(fleet, "node03") == [False, False]


def test_a_gate_reads_nvidia_smi_q_x_at_most_twice_per_node(run_a) -> None:
    """GPU facts once per run (the first GPU role's); gpu_power (before and after nvidia-smi -pl, on
    node04), the thermal gate and the burn-in take cheap CSV queries instead."""
    _, _, report, report_dir = run_a
    reads = FULL_READS[str(report_dir)]
    assert set(reads) == set(report["hosts"])
    assert all(1 <= n <= 2 for n in reads.values()), reads
    changes = {c["setting"].split("[")[0] for c in report["hosts"]["node04"]["changes"]}
    assert "gpu_power.enforced_limit_w" in changes, report["hosts"]["node04"]["changes"]
    # a real run that raised capped limits says what may have capped them, as check mode does
    assert "the rack's power budget" in report["hosts"]["node04"]["message"]


def test_prometheus_has_one_series_per_condition(run_a) -> None:
    """node01 was judged at idle and under load under the same thermal.* names: one series each."""
    _, _, report, report_dir = run_a
    names = [c["name"] for c in report["hosts"]["node01"]["checks"]]
    assert any(names.count(n) == 2 for n in names if n.startswith("thermal.gpu_temp_c["))
    series = [
        line.rsplit(" ", 1)[0]
        for line in (report_dir / "gpufleet.prom").read_text().splitlines()
        if line.startswith("gpufleet_check_ok{")
    ]
    assert len(series) == len(set(series))
    assert sum(1 for s in series if 'host="node01"' in s) == len(set(names))


def test_bmc_down_fails_closed(run_a) -> None:
    fleet, _, report, _ = run_a
    host = report["hosts"]["node04"]
    assert host["status"] == "blocked"
    assert _failed(host, "coolant.bmc")
    assert _instances_active(fleet, "node04") == [False, False]
