"""`gpufleet gate` on a simulated fleet: every simulator fault on nodes that serve.

A 12-node fleet (subnet 127.0.37), Slurm nodes: node01 stays clean; node02 and node03 each carry
three faults the gate re-asserts (each its own setting), node04..node11 one fault each, node12 is a
site whose idle gate lets a weak loop through (a low flow floor, a BMC health rollup it does not
trust) with its coolant flow low, so the burn-in under load must catch it.
The nodes the gate must block served before it (their units installed and pinned by the gate's own
steps, then started with both /run/gpufleet markers, as a passed gate leaves them).
One gate runs. A node it did not admit ends with no vLLM unit active and no marker left, whatever
step blocked it (one whose BMC cannot be read is found unfit before the drain and blocked there as
after it), drained and never resumed, its Slurm reason rewritten to name its first failed check
(`gpufleet gate: <check> <value>`, as scontrol, sinfo -R and its drain record show it), and carries a
failed check with value and limit, its message naming the step; an admitted node was drained first,
resumed only after passing, and serves.
The RDMA faults are re-asserted (pfc-off, ecn-off, roce-v1) or block the node (link-down), and the
topology is never rewritten around a dead port. Last, a second gate of three admitted nodes: a GPU
falls off the bus on one, another counts uncorrectable ECC errors, a third an Xid 94, each while its
burn-in runs; the health read when the load ends blocks all three.
"""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.request
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state
from gpufleet_sim import control, faults, faults_health, faults_switch, faults_tools, state, tools
from gpufleet_sim.fleet import Fleet

from tests.browser import ARTIFACTS, open_page
from tests.integration.conftest import (
    GATE_MARKERS,
    INSTANCES,
    node_hosts,
    node_ssh,
    run_on,
    serve_as_a_passed_gate_leaves,
)

# long enough for a weak loop to heat its GPUs past their limits under load, and for the load to reach
# the utilization floor on a busy 2-core machine
BURN_IN_SECONDS = "30"
# the reason the gate drains a Slurm node for, as the real slurmctld keeps it
DRAINED_FOR = "gpufleet gate (post-maintenance)"
# ... and the reason a node it blocked keeps: the failed checks it names (drain_state.drain_reason)
BLOCKED_FOR = "gpufleet gate: "
# where the gate's drain record is on the node (the drain role's drain_record_path)
RECORD = "/var/lib/gpufleet/drained"
MARKERS = GATE_MARKERS
# The cabling faults block the gate through the fabric role like the switch faults do: each is gated,
# named, in tests/integration/test_fabric.py (their leaves are shared by the nodes they cable).
# pdu-cap-in-service caps the limits 5 s in every 10 s while a node serves: whether the gate's re-assert
# reads a capped or an uncapped phase is chance, so its verdict here would be too; watch judges it
# (tests/integration/test_watch.py), and power-capped is the gate's cap (re-asserted, admitted).
IN_SERVICE = ("pdu-cap-in-service",)
# The hardware-health faults (issue 25): judged in tests/integration/test_node_health.py.
HEALTH = tuple(faults_health.FAULTS)
# Output a node's tools print that gpufleet must refuse by name (issue 36 item 2): judged by that
# item's own tests (tests/integration/test_drift.py), not added to this fleet's node count.
TOOL_OUTPUT = tuple(faults_tools.FAULTS)
# A port that retrains once as its fabric settles (issue 38 item 5): judged against the settling window
# in tests/integration/test_link_flap_settle.py.
SETTLING = ("nic-link-flap-once",)
FAULTS = tuple(
    f
    for f in faults.FAULTS
    if f not in faults_switch.FAULTS
    and f not in IN_SERVICE
    and f not in HEALTH
    and f not in TOOL_OUTPUT
    and f not in SETTLING
)
# Faults the gate re-asserts and admits the node after share a node (each changes a setting of its
# own, named below): every node costs its whole gate on a 2-core machine.
SHARED = (("power-capped", "pfc-off", "stale-nccl-topo"), ("persistence-off", "ecn-off", "roce-v1"))
# what the gate changes back for each re-asserted fault (a setting no other fault of its node touches)
REASSERTED = {
    "power-capped": "gpu_power.enforced_limit_w",
    "persistence-off": "gpu_power.persistence_mode",
    "pfc-off": "rdma_qos.pfc",
    "ecn-off": "rdma_qos.ecn_np",
    "roce-v1": "rdma_link.roce_mode",
}
assert {f for group in SHARED for f in group} <= set(FAULTS)
# node01 stays clean; node02.. get the shared groups, then each other fault on a node of its own
NODES = {
    f"node{i + 2:02d}": group
    for i, group in enumerate([*SHARED, *((f,) for f in FAULTS if not any(f in g for g in SHARED))])
}
# a weak loop the idle gate is told to let through (its inventory): the burn-in must block it
WEAK_LOOP = f"node{len(NODES) + 2:02d}"
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
# the check each blocking fault is named by in the node's Slurm reason
BLOCKED_BY = {
    "gpu-missing": "health.gpu_count",
    "link-down": "rdma_link.link_state[",
    "hot-gpu": "thermal.gpu_temp_c[",
    "low-coolant-flow": "coolant.flow_lpm[",
    "bmc-down": "coolant.bmc",
    "bmc-bad-credentials": "coolant.bmc",
    "prefix-cache-cliff": "service.prefix_cache_hit_rate",
}
assert set(BLOCKED_BY) == BLOCKING


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
    return next(n for n, faults in NODES.items() if fault in faults)


def _reason_names_a_failed_check(fleet: Fleet, name: str, host: dict[str, Any]) -> str:
    """The Slurm reason of a node the gate blocked (the real slurmctld's, as scontrol and sinfo -R show
    it, and the drain record on the node): `gpufleet gate: <check> <value>...`, naming first one of the
    node's failed checks; returns it."""
    reason = fleet.slurm.node(name).get("Reason") or ""
    assert reason.startswith(BLOCKED_FOR) and len(reason) <= 128, (name, reason)
    failed = {c["name"] for c in host["checks"] if not c["ok"]}
    assert reason[len(BLOCKED_FOR) :].split(" ", 1)[0] in failed, (name, reason, sorted(failed))
    # rewritten after the drain, without a state change: the controller's log has it last
    assert fleet.slurm.updates(name)[-1][1] == f"reason set to: {reason}", fleet.slurm.updates(name)[-3:]
    listed = subprocess.run(
        ["sinfo", "-R", "-h", "-n", name, "-o", "%128E"],
        capture_output=True,
        text=True,
        env=fleet.slurm.env(),
        check=True,
    )
    assert listed.stdout.strip() == reason, listed
    assert node_ssh(fleet, _address(fleet, name), f"cat {RECORD}").stdout == f"slurm: {reason}\n"
    return reason


def _topology(fleet: Fleet, name: str) -> str:
    return node_ssh(fleet, _address(fleet, name), "cat /etc/nccl/topo.xml").stdout


def _full_reads(fleet: Fleet) -> dict[str, int]:
    """How many times each node's nvidia-smi was asked for -q -x so far (the simulator's call log)."""
    return {
        node.name: sum(1 for argv in tools.calls(node, "nvidia-smi") if "-q" in argv and "-x" in argv)
        for node in sorted((fleet.root / "nodes").iterdir())
        if node.is_dir()
    }


@pytest.fixture(scope="module")
def gated(fleet_factory, tmp_path_factory) -> dict[str, Any]:
    fleet: Fleet = fleet_factory(nodes=len(NODES) + 2, subnet="127.0.37", slurm=True)
    blocked = sorted({_node(f) for f in BLOCKING} | {WEAK_LOOP})
    serve_as_a_passed_gate_leaves(fleet, blocked)
    serving = {name: (_active(fleet, name), _markers(fleet, name)) for name in blocked}
    topology_before = _topology(fleet, _node("link-down"))
    host_vars = fleet.root / "host_vars"
    host_vars.mkdir(exist_ok=True)
    for name in ["node01", *NODES, WEAK_LOOP]:
        extra = WEAK_LOOP_VARS if name == WEAK_LOOP else ""
        (host_vars / f"{name}.yml").write_text("gpufleet_drain_method: slurm\n" + extra)
    for name, injected in [*NODES.items(), (WEAK_LOOP, ("low-coolant-flow",))]:
        for fault in injected:
            control.fault(fleet, name, fault, clear=False)
    report_dir = tmp_path_factory.mktemp("gate-faults")
    before = _full_reads(fleet)
    code, report = run_on(fleet, report_dir, "gate", "--burn-in-seconds", BURN_IN_SECONDS)
    reads = {name: n - before.get(name, 0) for name, n in _full_reads(fleet).items()}
    return {
        "fleet": fleet,
        "serving": serving,
        "code": code,
        "report": report,
        "report_dir": report_dir,
        "topology_before": topology_before,
        "full_reads": reads,
    }


def test_the_nodes_to_be_blocked_were_serving(gated) -> None:
    for name, (active, markers) in gated["serving"].items():
        assert active == [True, True], name
        assert sorted(markers) == sorted(MARKERS), name


def test_a_node_the_gate_did_not_admit_serves_nothing_and_keeps_no_marker(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    blocked = [h for h, r in node_hosts(report).items() if r["status"] != "ok"]
    assert set(blocked) == {_node(f) for f in BLOCKING} | {WEAK_LOOP}, {
        h: report["hosts"][h]["message"] for h in blocked
    }
    # every one, the BMC faults found before the drain too (issue 36: they were left serving)
    for name in sorted(blocked):
        assert _active(fleet, name) == [False, False], f"{name} ({NODES.get(name)}) still serves"
        assert _markers(fleet, name) == [], f"{name} ({NODES.get(name)}) keeps a marker"
        # drained, never resumed: the real controller's log and its answer now
        changes = [(c["state"], c["reason"]) for c in fleet.slurm.changes(name)]
        assert changes == [("drain", DRAINED_FOR)], name
        # (its reason: the next test)
        assert fleet.slurm.node(name)["State"] == "IDLE+DRAIN", name
        assert "; left drained" in report["hosts"][name]["message"], report["hosts"][name]["message"]
    assert gated["code"] == 1


def test_a_blocked_nodes_slurm_reason_names_its_failed_check(gated) -> None:
    """Issue 38 item 6: drained first for DRAINED_FOR, a node the gate blocked keeps its drain with a
    reason that names the check that blocked it (the real slurmctld's), one gpufleet knows for its own."""
    fleet, report = gated["fleet"], gated["report"]
    reasons = {
        name: _reason_names_a_failed_check(fleet, name, host)
        for name, host in node_hosts(report).items()
        if host["status"] != "ok"
    }
    assert all(drain_state.is_ours(r) for r in reasons.values()), reasons
    named = {fault: reasons.get(_node(fault), "(admitted)") for fault in BLOCKED_BY}
    assert {f: r for f, r in named.items() if BLOCKED_BY[f] not in r} == {}, named
    assert "thermal." in reasons[WEAK_LOOP], reasons[WEAK_LOOP]


def test_every_blocked_node_has_a_failed_check_with_value_and_limit(gated) -> None:
    report = gated["report"]
    for name, host in node_hosts(report).items():
        if host["status"] == "ok":
            continue
        failed = [c for c in host["checks"] if not c["ok"]]
        assert failed, f"{name} ({NODES.get(name)}) blocked with no failed check: {host['message']}"
        assert all(c["value"] is not None and c["limit"] is not None for c in failed), (name, failed)
        assert "gate" in host["message"] and "items failed" not in host["message"], host["message"]


def test_admitted_nodes_serve_after_the_faults_were_reasserted(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    admitted = [h for h, r in node_hosts(report).items() if r["status"] == "ok"]
    assert "node01" in admitted
    for name in admitted:
        assert _active(fleet, name) == [True, True], name
        assert sorted(_markers(fleet, name)) == sorted(MARKERS), name
    changed = {h: {c["setting"].split("[")[0] for c in report["hosts"][h]["changes"]} for h in admitted}
    for fault, setting in REASSERTED.items():
        assert setting in changed[_node(fault)], (fault, changed[_node(fault)])


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


def test_the_gate_page_shows_the_weak_loop_failing_its_burn_in(gated) -> None:
    """report.html in a real headless Chromium: the blocked node's failed reading with value and
    limit, its burn-in drawn from the samples the report kept; nothing fetched, no console error."""
    host = gated["report"]["hosts"][WEAK_LOOP]
    traces = host["facts"]["gpufleet_burn_in"]
    # the burn-in stops at its first failing sample: the weak loop's dies throttle about a second into
    # the load (the die lag fitted to a real H200), so each trace holds its first samples, not 30 s
    assert len(traces["gpus"]) == 16 and all(len(g["t"]) == len(g["gpu_c"]) >= 2 for g in traces["gpus"])
    page = open_page(gated["report_dir"] / "report.html", ARTIFACTS / "gate-faults-report.png")
    assert page.console == [] and page.page_errors == [] and page.external_requests() == []
    hot = _failed(host, "thermal.gpu_temp_c")[0]
    assert f"{hot['value']:g} C" in page.text and f"{hot['limit']:g} C" in page.text
    chart = page.chart(WEAK_LOOP)
    assert chart is not None and chart.drawn, page.charts
    assert page.screenshot is not None and page.screenshot.stat().st_size > 0


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
    for name in node_hosts(report):
        _, password = fleet.bmc_credentials(name)
        for artifact in report_dir.iterdir():
            assert password not in artifact.read_text(), f"{name}'s BMC password in {artifact.name}"
        for log in (fleet.root / "nodes").glob("*/*.log"):
            assert password not in log.read_text(errors="replace")


def _mtime(fleet: Fleet, name: str, path: str) -> float:
    """When a file on the node was last written (its own /run), read over the node's ssh."""
    return float(node_ssh(fleet, _address(fleet, name), f"stat -c %.6Y {path}").stdout)


def _answers(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as response:
        return int(response.status)


def test_a_clean_node_passes_serves_and_is_resumed_only_after_passing(gated) -> None:
    fleet, report = gated["fleet"], gated["report"]
    host = report["hosts"]["node01"]
    assert host["status"] == "ok", host
    assert [c["name"] for c in host["checks"] if not c["ok"]] == []
    assert any(c["name"].startswith("burn_in.") for c in host["checks"])
    address = _address(fleet, "node01")
    assert (
        _answers(f"http://{address}:8000/health") == 200 and _answers(f"http://{address}:8001/health") == 200
    )
    changes = fleet.slurm.changes("node01")
    assert [(c["state"], c.get("reason")) for c in changes] == [("drain", DRAINED_FOR), ("resume", None)]
    # passed: no reason rewritten, undrained
    reasons = [what for _, what in fleet.slurm.updates("node01") if what.startswith("reason set to")]
    assert reasons == [f"reason set to: {DRAINED_FOR}"], reasons
    drained, resumed = float(changes[0]["time"]), float(changes[1]["time"])  # type: ignore[arg-type]
    # the instances may start only after the thermal gate; the node passed only after the burn-in
    started = _mtime(fleet, "node01", MARKERS[0])
    passed = _mtime(fleet, "node01", MARKERS[1])
    assert drained < started < passed < resumed
    assert "Reason" not in fleet.slurm.wait_state("node01", "IDLE")
    assert "drained" not in host.get("message", "")


def test_the_units_on_an_admitted_node_pass_systemds_verifier(gated) -> None:
    """`systemd-analyze verify` inside the node, on every unit file there: the vLLM instances the gate
    started and the boot units provision wrote (tests/unit/test_systemd_verify.py does the same for
    contrib/ and for each boot unit's text in a root it lays out)."""
    address = _address(gated["fleet"], "node01")
    # the files, not the host's own symlinks its /etc overlay shows (units the node does not have)
    find = "find /etc/systemd/system -maxdepth 1 -type f -name '*.service'"
    listed = node_ssh(gated["fleet"], address, find).stdout.split()
    assert {f"/etc/systemd/system/vllm-{i}.service" for i in INSTANCES} <= set(listed), listed
    verify = "systemd-analyze verify --man=no " + " ".join(listed)
    done = node_ssh(gated["fleet"], address, verify, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_low_flow_blocks_before_start_naming_reading_and_limit(gated) -> None:
    host = gated["report"]["hosts"][_node("low-coolant-flow")]
    flow = _failed(host, "coolant.flow_lpm")
    assert flow and all(c["limit"] == 8 and c["value"] < 8 for c in flow)
    assert not any(c["name"].startswith("burn_in.") for c in host["checks"])


def test_a_hot_gpu_blocks_before_start(gated) -> None:
    host = gated["report"]["hosts"][_node("hot-gpu")]
    hot = _failed(host, "thermal.gpu_temp_c")
    assert len(hot) == 1 and hot[0]["value"] > hot[0]["limit"]
    assert not any(c["name"].startswith("burn_in.") for c in host["checks"])


def test_a_bmc_that_is_down_fails_closed(gated) -> None:
    assert _failed(gated["report"]["hosts"][_node("bmc-down")], "coolant.bmc")


def test_a_capped_power_limit_is_reasserted_and_the_power_budget_named(gated) -> None:
    host = gated["report"]["hosts"][_node("power-capped")]
    assert host["status"] == "ok"
    changes = {c["setting"].split("[")[0] for c in host["changes"]}
    assert "gpu_power.enforced_limit_w" in changes, host["changes"]
    # a real run that raised capped limits says what may have capped them, as check mode does
    assert "the rack's power budget" in host["message"]


def test_a_gate_reads_nvidia_smi_q_x_at_most_four_times_per_node(gated) -> None:
    """One full read for the roles' plan and GPU facts, node_health's one read after the drain (the
    health readings: PCIe, ECC, remapped rows, versions), the PCIe replay counters when the burn-in's
    load starts (health.pcie_replays judges their rise under load) and the health read again when the
    load ends (a node that passed had all four); gpu_power (before and after nvidia-smi -pl), the
    thermal gate and the burn-in's samples take cheap CSV queries."""
    reads = gated["full_reads"]
    assert set(reads) == set(node_hosts(gated["report"]))
    assert all(n <= 4 for n in reads.values()), reads
    assert reads["node01"] == 4, reads


def test_prometheus_counts_each_condition_once(gated) -> None:
    """node01 was judged at idle and under load under the same thermal.* names: one series each."""
    report, report_dir = gated["report"], gated["report_dir"]
    names = [c["name"] for c in report["hosts"]["node01"]["checks"]]
    assert any(names.count(n) == 2 for n in names if n.startswith("thermal.gpu_temp_c["))
    prom = (report_dir / "gpufleet.prom").read_text().splitlines()
    series = [line.rsplit(" ", 1)[0] for line in prom if line and not line.startswith("#")]
    assert len(series) == len(set(series))
    # a condition judged twice (idle and under load) is counted once per area
    failed = {
        n for n in names if not all(c["ok"] for c in report["hosts"]["node01"]["checks"] if c["name"] == n)
    }
    for area in {n.split(".")[0] for n in names}:
        count = sum(1 for n in failed if n.split(".")[0] == area)
        assert f'gpufleet_failed_checks{{host="node01",command="gate",area="{area}"}} {count}' in prom


# Faults that happen while the burn-in's load runs, each on a node the gate above admitted (issue 36
# item 1: the health was read once, before the load, and each node was admitted serving).
DURING_BURN_IN = {"node02": "xid-79", "node03": "ecc-uncorrectable", "node04": "xid-94"}
# seconds into the burn-in each fault is injected, and the burn-in's length
INJECT_AFTER_S, LOADED_S = 3, "20"


def _burn_in_started(fleet: Fleet, name: str, since: int) -> bool:
    """The burn-in's first sample ran on the node (its watch sample, the query with the reason
    counters: the gate's other GPU reads are the thermal and power queries)."""
    calls = tools.calls(fleet.root / "nodes" / name, "nvidia-smi")[since:]
    return any("clocks_event_reasons_counters" in " ".join(argv) for argv in calls)


def test_a_gpu_lost_or_an_ecc_error_during_the_burn_in_blocks_the_node(gated, tmp_path) -> None:
    fleet = gated["fleet"]
    names = sorted(DURING_BURN_IN)
    assert all(gated["report"]["hosts"][n]["status"] == "ok" for n in names)
    assert all(_active(fleet, n) == [True, True] for n in names)
    since = {n: len(tools.calls(fleet.root / "nodes" / n, "nvidia-smi")) for n in names}
    drains = {n: len(fleet.slurm.changes(n)) for n in names}
    injected: dict[str, float] = {}
    gated_again = threading.Event()

    def inject(name: str) -> None:
        while not _burn_in_started(fleet, name, since[name]):
            if gated_again.wait(0.2):
                return  # the gate ended before this node's burn-in started
        time.sleep(INJECT_AFTER_S)
        control.fault(fleet, name, DURING_BURN_IN[name], clear=False)
        injected[name] = time.monotonic()

    injectors = [threading.Thread(target=inject, args=(n,), daemon=True) for n in names]
    for thread in injectors:
        thread.start()
    try:
        code, report = run_on(
            fleet, tmp_path / "gate", "gate", "--limit", ",".join(names), "--burn-in-seconds", LOADED_S
        )
    finally:
        gated_again.set()
        for thread in injectors:
            thread.join(timeout=60)
    assert sorted(injected) == names, "a burn-in never started"
    assert code == 1
    hosts = report["hosts"]
    for name in names:
        host = hosts[name]
        assert host["status"] == "blocked", (name, host["message"])
        assert "burn" in host["message"] and "; left drained" in host["message"], host["message"]
        # blocked: nothing serves, no marker, drained and never resumed
        assert _active(fleet, name) == [False, False], name
        assert _markers(fleet, name) == [], name
        changes = [(c["state"], c["reason"]) for c in fleet.slurm.changes(name)[drains[name] :]]
        assert changes == [("drain", DRAINED_FOR)], (name, changes)
        # the health read when the load ends named it
        assert "health." in _reason_names_a_failed_check(fleet, name, host), name
    lost = _failed(hosts["node02"], "health.")
    count = next(c for c in lost if c["name"] == "health.gpu_count")
    assert (count["value"], count["limit"]) == (15, 16)
    xid79 = [c for c in lost if c["name"].startswith("health.xid[")]
    assert [c["value"] for c in xid79] == [79] and "during the burn-in" in xid79[0]["message"]
    ecc = _failed(hosts["node03"], "health.")
    assert [(c["value"], c["limit"]) for c in ecc] == [(2, 0)], ecc
    assert ecc[0]["name"].startswith("health.ecc_uncorrectable[")
    contained = hosts["node04"]["checks"]
    assert [(c["value"], c["limit"]) for c in _failed(hosts["node04"], "health.ecc_uncorrectable[")] == [
        (1, 0)
    ]
    assert [c["value"] for c in contained if c["name"].startswith("health.xid[")] == [94]
