"""Every simulator fault through `gpufleet gate`, one fault per node, on a fleet that was serving.

A 15-node fleet (subnet 127.0.37) passes a first gate (every node admitted, both instances serving,
both markers in /run/gpufleet). Then node02..node15 each get one fault and a second gate runs: a node
the gate did not admit ends with no vLLM unit active and no marker left, whatever step blocked it,
and carries a failed check with value and limit, its message naming the step; an admitted node
serves. The RDMA faults are re-asserted by the gate (pfc-off, ecn-off, roce-v1) or block it
(link-down), and the topology is never rewritten around a dead port.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.sim import control, faults, state
from gpufleet.sim.fleet import Fleet
from tests.integration.conftest import node_ssh, run_on

# long enough for the load to reach the utilization floor on a busy 2-core machine
BURN_IN_SECONDS = "15"
INSTANCES = ("glm52", "kimik3")
MARKERS = ("/run/gpufleet/thermal-gate-passed", "/run/gpufleet/gate-passed")
FAULTS = tuple(faults.FAULTS)
# node01 stays clean; node02.. get the faults in the simulator's order
NODES = {f"node{i + 2:02d}": name for i, name in enumerate(FAULTS)}
# faults the gate cannot or must not fix: the node must not be admitted
BLOCKING = {
    "gpu-missing",
    "link-down",
    "hot-gpu",
    "low-coolant-flow",
    "bmc-down",
    "bmc-bad-credentials",
    "prefix-cache-cliff",
}


def _address(fleet: Fleet, name: str) -> str:
    return f"127.0.37.{int(name[4:]) + 1}"


def _active(fleet: Fleet, name: str) -> list[bool]:
    units = state.load(fleet.root / "nodes" / name).get("units", {})
    return [bool(units.get(f"vllm-{i}.service", {}).get("active")) for i in INSTANCES]


def _markers(fleet: Fleet, name: str) -> list[str]:
    done = node_ssh(fleet, _address(fleet, name), "ls " + " ".join(MARKERS) + " 2>/dev/null", check=False)
    return done.stdout.split()


def _topology(fleet: Fleet, name: str) -> str:
    return node_ssh(fleet, _address(fleet, name), "cat /etc/nccl/topo.xml").stdout


@pytest.fixture(scope="module")
def gated(fleet_factory, tmp_path_factory) -> dict[str, Any]:
    fleet: Fleet = fleet_factory(nodes=len(NODES) + 1, subnet="127.0.37")
    first_dir = tmp_path_factory.mktemp("gate-first")
    first_code, first = run_on(fleet, first_dir, "gate", "--burn-in-seconds", BURN_IN_SECONDS)
    serving = {name: (_active(fleet, name), _markers(fleet, name)) for name in ["node01", *NODES]}
    topology_before = _topology(fleet, "node" + next(n[4:] for n, f in NODES.items() if f == "link-down"))
    for name, fault in NODES.items():
        control.fault(fleet, name, fault, clear=False)
    report_dir = tmp_path_factory.mktemp("gate-faults")
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", BURN_IN_SECONDS)
    return {
        "fleet": fleet,
        "first": (first_code, first, serving),
        "code": code,
        "report": report,
        "topology_before": topology_before,
    }


def test_the_first_gate_admits_every_node_and_they_serve(gated) -> None:
    code, report, serving = gated["first"]
    assert code == 0, {h: r["message"] for h, r in report["hosts"].items() if r["status"] != "ok"}
    for name, (active, markers) in serving.items():
        assert active == [True, True], name
        assert sorted(markers) == sorted(MARKERS), name


def test_a_node_the_gate_did_not_admit_serves_nothing_and_keeps_no_marker(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    blocked = [h for h, r in report["hosts"].items() if r["status"] != "ok"]
    assert {NODES[h] for h in blocked} == BLOCKING, {h: report["hosts"][h]["message"] for h in blocked}
    for name in blocked:
        assert _active(fleet, name) == [False, False], f"{name} ({NODES[name]}) still serves"
        assert _markers(fleet, name) == [], f"{name} ({NODES[name]}) keeps a marker"
    assert gated["code"] == 1


def test_every_blocked_node_has_a_failed_check_with_value_and_limit(gated) -> None:
    report = gated["report"]
    for name, host in report["hosts"].items():
        if host["status"] == "ok":
            continue
        failed = [c for c in host["checks"] if not c["ok"]]
        assert failed, f"{name} ({NODES[name]}) blocked with no failed check: {host['message']}"
        assert all(c["value"] is not None and c["limit"] is not None for c in failed), (NODES[name], failed)
        assert "gate" in host["message"] and "items failed" not in host["message"], host["message"]


def test_admitted_nodes_serve_after_the_faults_were_reasserted(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    admitted = [h for h, r in report["hosts"].items() if r["status"] == "ok"]
    assert "node01" in admitted
    for name in admitted:
        assert _active(fleet, name) == [True, True], name
        assert sorted(_markers(fleet, name)) == sorted(MARKERS), name
    fixed = {NODES[h]: report["hosts"][h]["changes"] for h in admitted if h != "node01"}
    for fault in ("pfc-off", "ecn-off", "roce-v1"):
        assert any(c["setting"].startswith(("rdma_qos.", "rdma_link.")) for c in fixed[fault]), (
            fault,
            fixed[fault],
        )


def test_link_down_blocks_by_name_and_the_topology_is_not_rewritten(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    name = next(n for n, f in NODES.items() if f == "link-down")
    failed = [c for c in report["hosts"][name]["checks"] if not c["ok"]]
    assert any(c["name"].startswith("rdma_link.link_state[") for c in failed), failed
    assert _topology(fleet, name) == gated["topology_before"]
