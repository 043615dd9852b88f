"""`gpufleet watch` on three simulated nodes that serve (subnet 127.0.97): the three in-service
incidents, each injected while the instances serve, named by one watch run with value, limit and
the likely cause; a healthy serving fleet gives none; a watch changes nothing and starts no load;
its Prometheus file passes promtool and lands in a textfile collector directory, where Debian's
node_exporter, Prometheus and Alertmanager alert on it (tests/prometheus_stack.py).

The gate starts the instances (as in production: nothing serves before it passed); the serving
load is the simulator's clients (sim/serving.py), a few requests in flight on every instance.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpufleet_sim import control, state
from gpufleet_sim.fleet import Fleet
from gpufleet_sim.serving import ServingLoad, fleet_instance_urls

from tests.integration.conftest import node_hosts, promtool_passes, run_on
from tests.prometheus_stack import PrometheusStack
from tests.unit.test_alert_rules import RULES, dashboard_queries

NODES = ("node01", "node02", "node03")


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    started: Fleet = fleet_factory(nodes=3, subnet="127.0.97")
    code, gate = run_on(started, tmp_path_factory.mktemp("gate"), "gate", "--burn-in-seconds", "5")
    assert code == 0, json.dumps(gate["summary"])
    return started


@pytest.fixture
def serving(fleet: Fleet) -> Iterator[ServingLoad]:
    urls = fleet_instance_urls(fleet.root)
    assert len(urls) == 2 * len(NODES), urls  # two instances per node, started by the gate
    with ServingLoad(urls, concurrency=4) as load:
        yield load
    assert load.ok > 0 and load.failed == 0, load.last_error


def watch(fleet: Fleet, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    return run_on(fleet, report_dir, "watch", *extra)


def watch_with(
    fleet: Fleet, target: str, fault: str, report_dir: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    """One watch while ``fault`` holds on ``target`` (a node or a leaf); the fault cleared after."""
    assert control.fault(fleet, target, fault, clear=False) == [fault]
    try:
        return watch(fleet, report_dir, *extra)
    finally:
        control.fault(fleet, target, fault, clear=True)


def failed(report: dict[str, Any], host: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["hosts"][host]["checks"] if not c["ok"]}


def tool_calls(fleet: Fleet, node: str) -> list[list[str]]:
    path = fleet.root / "nodes" / node / "tool_calls.jsonl"
    return [json.loads(line)["argv"] for line in path.read_text().splitlines()]


def settings(fleet: Fleet, node: str) -> dict[str, Any]:
    """What a change would move: units, GPU power and persistence, the node's faults."""
    data = state.load(fleet.root / "nodes" / node)
    gpus = [(g["uuid"], g["power"]["requested_limit_w"], g["persistence_mode"]) for g in data["gpus"]]
    return {"units": data["units"], "gpus": gpus}


def test_a_healthy_serving_fleet_gives_nothing_and_the_watch_changes_nothing(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    before = {n: (settings(fleet, n), len(tool_calls(fleet, n))) for n in NODES}
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()  # node_exporter's directory exists; gpufleet never makes one up
    code, report = watch(fleet, tmp_path / "watch", "--textfile-dir", str(textfiles))
    assert code == 0, json.dumps({n: h.get("message") for n, h in report["hosts"].items()})
    assert set(node_hosts(report)) == set(NODES)
    for node in NODES:
        host = report["hosts"][node]
        assert host["status"] == "ok" and failed(report, node) == {}
        reading = host["facts"]["gpufleet_watch"]
        assert len(reading["gpus"]) == 16 and len(reading["ports"]) == 8
        assert {i["name"] for i in reading["instances"]} == {"glm52", "kimik3"}
        # the instances served during the window: a hit rate and tokens, at the healthy level
        for instance in reading["instances"]:
            assert instance["up"] == 1 and instance["generation_tokens_per_second"] > 0, instance
            assert instance["prefix_cache_hit_ratio"] > 0.8, instance
        # nothing changed, and only reads ran: the watch sample and ethtool -S
        settled, calls = before[node]
        assert settings(fleet, node) == settled
        ran = tool_calls(fleet, node)[calls:]
        assert ran and {
            (argv[0].rsplit("/", 1)[-1], (argv[1:] or [""])[0].split("=")[0]) for argv in ran
        } == {
            ("nvidia-smi", "--query-gpu"),
            ("ethtool", "-S"),
            # the hardware health: one -q -x, nvlink -s and -e, the kernel log, and the PCIe switches' ACS
            # (lspci -D -vvv: the node has RDMA devices, so GPUDirect RDMA is judged)
            ("nvidia-smi", "-q"),
            ("nvidia-smi", "nvlink"),
            ("dmesg", ""),
            ("lspci", "-D"),
        }
    prom = textfiles / "gpufleet_watch.prom"
    assert prom.read_text() == (tmp_path / "watch" / "gpufleet.prom").read_text()
    promtool_passes(prom)
    assert "gpufleet_vllm_prefix_cache_hit_ratio{" in prom.read_text()


def test_a_watch_without_serving_starts_no_load(fleet: Fleet, tmp_path: Path) -> None:
    def served() -> dict[str, float]:
        counts = {}
        for url in fleet_instance_urls(fleet.root):
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
                text = answer.read().decode()
            counts[url] = sum(
                float(line.split()[-1])
                for line in text.splitlines()
                if line.startswith("vllm:prompt_tokens_total")
            )
        return counts

    before = served()
    code, report = watch(fleet, tmp_path / "watch")
    assert code == 0
    assert served() == before  # no completion was sent by the watch
    for node in NODES:
        for instance in report["hosts"][node]["facts"]["gpufleet_watch"]["instances"]:
            assert (
                instance["prefix_cache_hit_ratio"] is None and instance["generation_tokens_per_second"] == 0
            )


def drift_file(fleet: Fleet, textfiles: Path, report_dir: Path) -> None:
    """node02 drifted (ecn-off), in drift's file (gpufleet_drift.prom) in ``textfiles``."""
    assert control.fault(fleet, "node02", "ecn-off", clear=False) == ["ecn-off"]
    try:
        run_on(fleet, report_dir, "drift", "--limit", "node02", "--textfile-dir", str(textfiles))
    finally:
        control.fault(fleet, "node02", "ecn-off", clear=True)
    assert (textfiles / "gpufleet_drift.prom").read_text() == (report_dir / "gpufleet.prom").read_text()


def shorten_for(rules: Path, alert: str, duration: str) -> None:
    groups = yaml.safe_load(rules.read_text())
    for rule in (r for g in groups["groups"] for r in g["rules"] if r.get("alert") == alert):
        rule["for"] = duration
    rules.write_text(yaml.safe_dump(groups))


def test_a_pdu_cap_in_waves_is_named_with_value_limit_and_cause(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    """Also through Debian's node_exporter, Prometheus and Alertmanager (tests/conformance/README.md):
    the watch's file, scraped with the rules as shipped, makes GPUPowerCapped pending; with its
    `for:` shortened in their copy it fires and Alertmanager holds it with the node's labels; the
    recording rule and every dashboard query return series."""
    textfiles, rules = tmp_path / "textfile", tmp_path / "rules.yml"
    textfiles.mkdir()
    shutil.copy(RULES, rules)
    # started first: its wait for the first scrape overlaps the runs
    with PrometheusStack(textfiles, [rules], tmp_path) as stack:
        drift_file(fleet, textfiles, tmp_path / "drift")
        code, report = watch_with(
            fleet, "node02", "pdu-cap-in-service", tmp_path / "watch", "--textfile-dir", str(textfiles)
        )
        assert code == 1
        assert report["hosts"]["node01"]["status"] == "ok" and report["hosts"]["node03"]["status"] == "ok"
        capped = failed(report, "node02")
        power = {name: c for name, c in capped.items() if name.startswith("gpu_power.enforced_limit_w[")}
        assert len(power) == 16, sorted(capped)
        for c in power.values():
            assert (c["value"], c["limit"], c["unit"]) == (1100.0, 1400.0, "W")
            assert "the rack's power budget (a PDU protection or power brake)" in c["message"]
        assert "rack's PDU" in report["hosts"]["node02"]["message"]
        gpus = report["hosts"]["node02"]["facts"]["gpufleet_watch"]["gpus"]
        assert all(g["power_limit_w"] == {"requested": 1400.0, "enforced": 1100.0} for g in gpus)

        stack.wait_scraped()
        pending = stack.wait_for("GPUPowerCapped pending", lambda: stack.alerts("GPUPowerCapped", "pending"))
        assert {(a["labels"]["host"], a["labels"]["command"]) for a in pending} == {("node02", "watch")}
        assert sorted(int(a["labels"]["gpu"]) for a in pending) == list(range(16))

        shorten_for(rules, "GPUPowerCapped", "1s")
        stack.reload("GPUPowerCapped", 1)
        stack.wait_for("GPUPowerCapped firing", lambda: len(stack.alerts("GPUPowerCapped", "firing")) == 16)

        def held_for_every_gpu() -> list[dict[str, Any]] | None:
            held = stack.alertmanager_alerts("GPUPowerCapped")
            return held if len(held) == 16 else None

        held = stack.wait_for("Alertmanager holds GPUPowerCapped of every GPU", held_for_every_gpu)
        for alert in held:
            labels = alert["labels"]
            assert (labels["host"], labels["command"], labels["severity"]) == ("node02", "watch", "warning")
            assert labels["uuid"].startswith("GPU-") and labels["instance"] == stack.exporter, labels
        assert sorted(int(a["labels"]["gpu"]) for a in held) == list(range(16))

        recorded = stack.query("gpufleet:vllm_prefix_cache_hit_ratio:avg_over_time_1h")
        assert {(s["metric"]["host"], s["metric"]["vllm_instance"]) for s in recorded} == {
            (node, instance) for node in NODES for instance in ("glm52", "kimik3")
        }
        empty = [expr for expr in dashboard_queries() if not stack.query(expr)]
        assert empty == []


def test_a_prefix_cache_cliff_while_serving_is_named(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    code, report = watch_with(fleet, "node03", "prefix-cache-cliff", tmp_path / "watch")
    assert code == 1
    cliff = failed(report, "node03")
    assert set(cliff) == {"service.prefix_cache_hit_rate[glm52]", "service.prefix_cache_hit_rate[kimik3]"}
    for c in cliff.values():
        assert c["value"] == pytest.approx(0.07, abs=0.03) and c["limit"] == 0.5
        assert "session id" in c["message"]
    assert report["hosts"]["node01"]["status"] == "ok"


def test_pfc_off_on_a_leaf_shows_in_the_counters_while_serving(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    code, report = watch_with(fleet, "leaf02", "switch-pfc-off", tmp_path / "watch")
    assert code == 1
    # node01's ports mlx5_4..7 are cabled to leaf02, mlx5_0..3 to leaf01
    retransmits = {n for n in failed(report, "node01") if n.startswith("fabric.retransmits[")}
    assert retransmits == {f"fabric.retransmits[mlx5_{i}]" for i in range(4, 8)}
    ports = {p["ibdev"]: p for p in report["hosts"]["node01"]["facts"]["gpufleet_watch"]["ports"]}
    assert ports["mlx5_4"]["retransmits_per_second"] > 1 and ports["mlx5_0"]["retransmits_per_second"] <= 1


def test_a_port_that_goes_down_while_serving_is_named(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    """Its counters read zero on zero traffic (every rate check passes on them): the link's own state
    and its share of the traffic next to its loaded siblings name it, with its leaf port."""
    code, report = watch_with(fleet, "node02", "link-down", tmp_path / "watch")
    assert code == 1
    down = failed(report, "node02")
    state_check = down["rdma_link.link_state[mlx5_7]"]
    assert (state_check["value"], state_check["limit"]) == ("DOWN", "ACTIVE")
    assert (
        "mlx5_7 (cabled to leaf" in state_check["message"]
        and "during the watch window" in state_check["message"]
    )
    traffic = down["fabric.traffic[mlx5_7]"]
    assert traffic["value"] == 0 and traffic["limit"] == 0.1
    assert {n for n in down if "[mlx5_" in n} == {"rdma_link.link_state[mlx5_7]", "fabric.traffic[mlx5_7]"}
    assert report["hosts"]["node01"]["status"] == "ok" and report["hosts"]["node03"]["status"] == "ok"
    prom = (tmp_path / "watch" / "gpufleet.prom").read_text()
    assert 'gpufleet_rdma_link_up{host="node02",command="watch",port="mlx5_7"} 0' in prom
    assert 'gpufleet_rdma_link_up{host="node02",command="watch",port="mlx5_6"} 1' in prom
    assert 'gpufleet_failed_checks{host="node02",command="watch",area="rdma_link"} 1' in prom


def test_a_healthy_fleet_just_after_its_load_stops_passes(fleet: Fleet, tmp_path: Path) -> None:
    """The ports pause for microseconds as the load winds down and ECN marks nothing: no congestion,
    no fault (the watch failed fabric.ecn_loop with value 0 here)."""
    with ServingLoad(fleet_instance_urls(fleet.root), concurrency=4) as load:
        time.sleep(5)
    assert load.ok > 0 and load.failed == 0, load.last_error
    code, report = watch(fleet, tmp_path / "watch")
    assert code == 0, {n: sorted(failed(report, n)) for n in NODES}
    for node in NODES:
        ecn = [c for c in report["hosts"][node]["checks"] if c["name"].startswith("fabric.ecn_loop[")]
        assert len(ecn) == 8 and all(c["ok"] for c in ecn)


def test_host_ecn_off_while_serving_is_the_broken_loop(
    fleet: Fleet, serving: ServingLoad, tmp_path: Path
) -> None:
    """Issue 25's blind spot: the leaf marks, the host's notification point is off, so no CNP goes back
    and the senders never slow down; the counter rules passed it (no pause over the limit)."""
    code, report = watch_with(fleet, "node03", "ecn-off", tmp_path / "watch")
    assert code == 1
    loops = {n: c for n, c in failed(report, "node03").items() if n.startswith("fabric.ecn_loop[")}
    assert len(loops) == 8, sorted(failed(report, "node03"))
    for c in loops.values():
        assert (
            c["value"] == 0 and "sent no CNP" in c["message"] and "notification point is off" in c["message"]
        )
    assert report["hosts"]["node01"]["status"] == "ok"


def _burn_in_started(fleet: Fleet, node: str, since: int) -> bool:
    """The burn-in's first sample ran on the node (the watch sample with the reason counters: the
    gate's other GPU reads are the thermal and power queries; its all-reduce loads the GPUs too, so
    their load alone does not tell the burn-in)."""
    calls = tool_calls(fleet, node)[since:]
    return any(
        argv[0].endswith("nvidia-smi") and "clocks_event_reasons_counters" in " ".join(argv) for argv in calls
    )


def test_a_link_that_dies_during_the_gates_burn_in_blocks_the_node(fleet: Fleet, tmp_path: Path) -> None:
    """node02's mlx5_7 goes down 5 s into a 20 s burn-in (issue 28: the gate admitted it, every
    counter check passing on the dead port). Last in this module: node02 ends blocked."""
    injected: list[float] = []
    since = len(tool_calls(fleet, "node02"))

    def inject() -> None:
        deadline = time.monotonic() + 300
        while not _burn_in_started(fleet, "node02", since) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(5)
        control.fault(fleet, "node02", "link-down", clear=False)
        injected.append(time.monotonic())

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    try:
        code, report = run_on(
            fleet, tmp_path / "gate", "gate", "--limit", "node02", "--burn-in-seconds", "20"
        )
    finally:
        injector.join(timeout=310)
        control.fault(fleet, "node02", "link-down", clear=True)
    assert injected, "the burn-in never started on node02"
    assert code == 1
    host = report["hosts"]["node02"]
    assert host["status"] == "blocked"
    down = {c["name"]: c for c in host["checks"] if not c["ok"]}
    link = down["rdma_link.link_state[mlx5_7]"]
    assert "went down during the burn-in" in link["message"] and "cabled to leaf" in link["message"]
    assert "ACTIVE / LinkUp" in link["message"] and "DOWN / Disabled" in link["message"]
    assert down["fabric.link_flaps[mlx5_7]"]["value"] == 1
    # blocked: no instance left running, no marker
    units = state.load(fleet.root / "nodes" / "node02")["units"]
    assert not any(units.get(f"vllm-{i}.service", {}).get("active") for i in ("glm52", "kimik3"))
    assert "burn-in" in host["message"] or "burn_in" in host["message"], host["message"]
