"""Every simulator fault through `gpufleet gate`, one fault per node, on a fleet that was serving.

A 16-node fleet (subnet 127.0.37) passes a first gate (every node admitted, both instances serving,
both markers in /run/gpufleet). Then node02..node15 each get one fault and a second gate runs: a node
the gate did not admit ends with no vLLM unit active and no marker left, whatever step blocked it,
and carries a failed check with value and limit, its message naming the step; an admitted node
serves. The RDMA faults are re-asserted by the gate (pfc-off, ecn-off, roce-v1) or block it
(link-down), and the topology is never rewritten around a dead port. node16 is a site whose idle gate
lets a weak loop through (a low flow floor, a BMC health rollup it does not trust): its coolant flow is
low and the burn-in, under load, is what must catch it.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.sim import control, faults, state
from gpufleet.sim.fleet import Fleet
from tests.integration.conftest import node_ssh, run_on

# long enough for the load to reach the utilization floor on a busy 2-core machine; the second gate's
# is long enough for a weak loop to heat its GPUs past their limits under load
BURN_IN_SECONDS = "15"
FAULTED_BURN_IN_SECONDS = "20"
INSTANCES = ("glm52", "kimik3")
MARKERS = ("/run/gpufleet/thermal-gate-passed", "/run/gpufleet/gate-passed")
FAULTS = tuple(faults.FAULTS)
# node01 stays clean; node02.. get the faults in the simulator's order
NODES = {f"node{i + 2:02d}": name for i, name in enumerate(FAULTS)}
# a weak loop the idle gate is told to let through (its inventory): the burn-in must block it
WEAK_LOOP = "node16"
WEAK_LOOP_VARS = "thermal_gate_min_flow_lpm: 4\nthermal_gate_allowed_health: [OK, Warning, Critical]\n"
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


def _failed(host: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [c for c in host["checks"] if not c["ok"] and c["name"].startswith(prefix)]


def _node(fault: str) -> str:
    return next(n for n, f in NODES.items() if f == fault)


def _topology(fleet: Fleet, name: str) -> str:
    return node_ssh(fleet, _address(fleet, name), "cat /etc/nccl/topo.xml").stdout


@pytest.fixture(scope="module")
def gated(fleet_factory, tmp_path_factory) -> dict[str, Any]:
    fleet: Fleet = fleet_factory(nodes=len(NODES) + 2, subnet="127.0.37")
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / f"{WEAK_LOOP}.yml").write_text(WEAK_LOOP_VARS)
    first_dir = tmp_path_factory.mktemp("gate-first")
    first_code, first = run_on(fleet, first_dir, "gate", "--burn-in-seconds", BURN_IN_SECONDS)
    serving = {name: (_active(fleet, name), _markers(fleet, name)) for name in ["node01", *NODES, WEAK_LOOP]}
    topology_before = _topology(fleet, _node("link-down"))
    for name, fault in [*NODES.items(), (WEAK_LOOP, "low-coolant-flow")]:
        control.fault(fleet, name, fault, clear=False)
    report_dir = tmp_path_factory.mktemp("gate-faults")
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", FAULTED_BURN_IN_SECONDS)
    return {
        "fleet": fleet,
        "first": (first_code, first, serving),
        "code": code,
        "report": report,
        "report_dir": report_dir,
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
    assert set(blocked) == {_node(f) for f in BLOCKING} | {WEAK_LOOP}, {
        h: report["hosts"][h]["message"] for h in blocked
    }
    for name in blocked:
        assert _active(fleet, name) == [False, False], f"{name} ({NODES.get(name)}) still serves"
        assert _markers(fleet, name) == [], f"{name} ({NODES.get(name)}) keeps a marker"
    assert gated["code"] == 1


def test_every_blocked_node_has_a_failed_check_with_value_and_limit(gated) -> None:
    report = gated["report"]
    for name, host in report["hosts"].items():
        if host["status"] == "ok":
            continue
        failed = [c for c in host["checks"] if not c["ok"]]
        assert failed, f"{name} ({NODES.get(name)}) blocked with no failed check: {host['message']}"
        assert all(c["value"] is not None and c["limit"] is not None for c in failed), (name, failed)
        assert "gate" in host["message"] and "items failed" not in host["message"], host["message"]


def test_admitted_nodes_serve_after_the_faults_were_reasserted(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    admitted = [h for h, r in report["hosts"].items() if r["status"] == "ok"]
    assert "node01" in admitted
    for name in admitted:
        assert _active(fleet, name) == [True, True], name
        assert sorted(_markers(fleet, name)) == sorted(MARKERS), name
    fixed = {NODES[h]: report["hosts"][h]["changes"] for h in admitted if h in NODES}
    for fault in ("pfc-off", "ecn-off", "roce-v1"):
        assert any(c["setting"].startswith(("rdma_qos.", "rdma_link.")) for c in fixed[fault]), (
            fault,
            fixed[fault],
        )


def test_link_down_blocks_by_name_and_the_topology_is_not_rewritten(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    name = _node("link-down")
    failed = [c for c in report["hosts"][name]["checks"] if not c["ok"]]
    assert any(c["name"].startswith("rdma_link.link_state[") for c in failed), failed
    assert _topology(fleet, name) == gated["topology_before"]


def test_a_weak_loop_passes_idle_and_fails_the_burn_in_under_load(gated) -> None:
    report = gated["report"]
    host = report["hosts"][WEAK_LOOP]
    assert host["status"] == "blocked"
    assert not _failed(host, "coolant.flow_lpm")
    # The idle gate and the burn-in judge under the same thermal.* names: every failed one is the
    # burn-in's (under load), and the same condition passed at idle.
    hot = _failed(host, "thermal.")
    assert hot and all("under load" in c["message"] for c in hot)
    passed_idle = {c["name"] for c in host["checks"] if c["ok"]}
    assert {c["name"] for c in hot} <= passed_idle


def test_a_prefix_cache_cliff_is_a_failed_check_named_in_the_message(gated) -> None:
    host = gated["report"]["hosts"][_node("prefix-cache-cliff")]
    assert host["status"] == "blocked"
    cliff = _failed(host, "service.prefix_cache_hit_rate")
    assert cliff and all(c["value"] < 0.2 and c["limit"] == 0.5 for c in cliff)
    assert "prefix" in host["message"] and "items failed" not in host["message"]


def test_bad_credentials_fail_closed_and_the_password_is_never_written(gated) -> None:
    fleet, report, report_dir = gated["fleet"], gated["report"], gated["report_dir"]
    assert report["hosts"][_node("bmc-bad-credentials")]["status"] == "blocked"
    assert _failed(report["hosts"][_node("bmc-bad-credentials")], "coolant.bmc")
    for name in report["hosts"]:
        _, password = fleet.bmc_credentials(name)
        for artifact in report_dir.iterdir():
            assert password not in artifact.read_text(), f"{name}'s BMC password in {artifact.name}"
        for log in (fleet.root / "nodes").glob("*/*.log"):
            assert password not in log.read_text(errors="replace")
