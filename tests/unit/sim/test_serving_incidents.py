"""Incidents while the node serves: ServingLoad keeps the stand-in vLLM busy (in-process HTTP servers on
loopback, the real engine, the node state on disk), then a fault lands mid-service: the PDU's power
cap waves, the prefix-cache cliff, a leaf without PFC. Real time, a few seconds per test."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi as parser
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_counters
from gpufleet_sim import build, faults, faults_switch, nvue, roce_traffic, serving, state, sysfs, sysfs_rdma
from gpufleet_sim.tools import nvidia_smi, vllm_engine, vllm_http

from tests.unit.sim.test_vllm_standin import config

# This module's windows are fractions of a second: its loads send short requests, not
# serving.LOAD_MAX_TOKENS.
SHORT = 16
QUERY = "uuid,enforced.power.limit,clocks_event_reasons.active,clocks_event_reasons_counters.sw_power_cap"
# test_vllm_standin's engine with a short context and a smaller batch
CONFIG = config(
    max_model_len=8192,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    gpu_memory_utilization=0.9,
    swap_space=4.0,
)


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    """node01 of a fleet directory with its two leaves (the RoCE counters read their NVUE state)."""
    path = tmp_path / "nodes" / "node01"
    path.mkdir(parents=True)
    built = build.build_node_state("node01", "b300-16", 1)
    state.save(path, built)
    sysfs.render(path / "sys", built)
    for leaf in ("leaf01", "leaf02"):
        nvue.prepare(tmp_path / "leaves", leaf, "127.0.0.2", ports=build.LEAF_PORTS)
    return path


def domain(node_dir: Path, board: int) -> list[str]:
    return [g["uuid"] for g in state.present_gpus(state.load(node_dir)) if g["nvlink_domain"] == board]


@pytest.fixture
def instances(node_dir: Path) -> Iterator[list[str]]:
    """One stand-in instance per NVLink baseboard (TP 8), as the reference deployment runs them."""
    servers = [
        vllm_http.Server(("127.0.0.1", 0), vllm_engine.Engine(node_dir, CONFIG, domain(node_dir, b)))
        for b in (0, 1)
    ]
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    finally:
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join()


def in_flight(node_dir: Path, board: int) -> set[int]:
    uuids = domain(node_dir, board)
    return {int(g["load"]["requests"]) for g in state.load(node_dir)["gpus"] if g["uuid"] in uuids}


def load_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("serving-load")]


# ------------------------------------------------------------------------ ServingLoad


def test_serving_load_keeps_its_requests_in_flight_and_leaves_no_thread(
    node_dir: Path, instances: list[str]
) -> None:
    with serving.ServingLoad(instances[:1], concurrency=4, max_tokens=SHORT) as load:
        assert len(load_threads()) == 4
        samples = []
        for _ in range(20):
            time.sleep(0.05)
            samples.append(in_flight(node_dir, 0))
        assert in_flight(node_dir, 1) == {0}  # the other baseboard's instance gets nothing
    assert all(len(s) == 1 and max(s) <= 4 for s in samples)  # every GPU of the instance, together
    assert sum(max(s) for s in samples) / len(samples) >= 2.5
    assert load.ok > 10 and load.failed == 0 and load.successes == {instances[0]: load.ok}
    assert load_threads() == []
    assert in_flight(node_dir, 0) == {0}  # every request finished before the threads were joined


def test_serving_load_counts_errors_and_still_stops(instances: list[str]) -> None:
    with serving.ServingLoad(["http://127.0.0.1:9"], concurrency=2) as load:  # nothing listens
        time.sleep(0.5)
    assert load.ok == 0 and load.failed >= 2 and load.last_error is not None
    assert load_threads() == []


def test_the_instance_urls_of_a_node_are_its_running_vllm_units(tmp_path: Path) -> None:
    node = tmp_path / "nodes" / "node03"
    units = node / "etc-upper" / "systemd" / "system"
    units.mkdir(parents=True)
    current = build.build_node_state("node03", "h100-8", 3)
    current["address"] = "10.77.0.4"
    current["units"].update(
        {
            "vllm-glm52.service": {"enabled": False, "active": True},
            "vllm-small.service": {"enabled": False, "active": True},
            "vllm-stopped.service": {"enabled": False, "active": False},
        }
    )
    state.save(node, current)
    exec_start = "ExecStart=/opt/vllm/bin/vllm serve zai-org/GLM-5.2-NVFP4 --host {} --port {} -tp 8\n"
    (units / "vllm-glm52.service").write_text("[Service]\n" + exec_start.format("0.0.0.0", 8001))
    (units / "vllm-small.service").write_text(
        "[Service]\nExecStart=/opt/vllm/bin/vllm serve m --host=127.0.0.1\n"
    )
    (units / "vllm-stopped.service").write_text("[Service]\n" + exec_start.format("0.0.0.0", 8002))
    assert serving.instance_urls(node) == ["http://10.77.0.4:8001", "http://127.0.0.1:8000"]
    assert serving.fleet_instance_urls(tmp_path) == ["http://10.77.0.4:8001", "http://127.0.0.1:8000"]


# ------------------------------------------------------------------------ pdu-cap-in-service


def smi_rows(node_dir: Path) -> dict[str, dict[str, Any]]:
    # nvidia_smi.run: the text main() prints (the servers' access log shares this process's stdout)
    out = nvidia_smi.run([f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], node_dir)
    return {r["uuid"]: r for r in parser.parse_query_csv(out, fields=QUERY.split(","))}


def test_the_pdu_cap_shows_as_sw_power_cap_on_the_serving_gpus(node_dir: Path, instances: list[str]) -> None:
    serving_gpus, idle_gpus = domain(node_dir, 0), domain(node_dir, 1)
    with serving.ServingLoad(instances[:1], max_tokens=SHORT) as load:
        time.sleep(0.3)
        faults.inject(node_dir, "pdu-cap-in-service")
        since = state.load(node_dir)["pdu_cap"]["since"]
        capped = []
        while time.time() < since + 4.0:  # the first capped half of the wave
            time.sleep(0.5)
            capped.append(smi_rows(node_dir))
        time.sleep(max(since + 6.0 - time.time(), 0))
        free = smi_rows(node_dir)
    assert load.failed == 0
    for rows in capped:
        assert {rows[u]["enforced.power.limit"] for u in rows} == {1100.0}
        assert {
            parser.decode_reasons(rows[u]["clocks_event_reasons.active"]) == ["gpu_idle"] for u in idle_gpus
        } == {True}
    # a modest load draws past 1100 W: the reason shows (whenever two or more requests run)
    shown = [
        all(
            parser.decode_reasons(rows[u]["clocks_event_reasons.active"]) == ["sw_power_cap"]
            for u in serving_gpus
        )
        for rows in capped
    ]
    assert sum(shown) >= len(shown) / 2, shown
    assert {free[u]["enforced.power.limit"] for u in free} == {1400.0}
    assert {free[u]["clocks_event_reasons.active"] for u in serving_gpus} == {"0x0000000000000000"}
    counted = [free[u]["clocks_event_reasons_counters.sw_power_cap"] / 1e6 for u in serving_gpus]
    assert all(2.5 < c < 5.01 for c in counted), counted  # most of the 5 s capped half
    assert {free[u]["clocks_event_reasons_counters.sw_power_cap"] for u in idle_gpus} == {0}


# ------------------------------------------------------------------------ prefix-cache-cliff


def cache_counters(url: str) -> tuple[float, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = dict(re.findall(r"^(vllm:prefix_cache_(?:hits|queries)_total)\{[^}]*\} (\S+)$", text, re.M))
    return float(found["vllm:prefix_cache_hits_total"]), float(found["vllm:prefix_cache_queries_total"])


def hit_rate_over(url: str, seconds: float) -> float:
    """The hit rate of the tokens served over at least ``seconds``, and over at least 100 tokens: on a
    busy machine the load serves fewer a second, so the window grows (up to 10 s) until it has them."""
    hits0, queries0 = cache_counters(url)
    time.sleep(seconds)
    deadline = time.monotonic() + 10.0
    hits1, queries1 = cache_counters(url)
    while queries1 - queries0 <= 100 and time.monotonic() < deadline:
        time.sleep(0.2)
        hits1, queries1 = cache_counters(url)
    assert queries1 - queries0 > 100  # tokens served in the window
    return (hits1 - hits0) / (queries1 - queries0)


def test_the_prefix_cache_cliff_hits_the_traffic_served_after_it(
    node_dir: Path, instances: list[str]
) -> None:
    url = instances[0]
    with serving.ServingLoad([url], max_tokens=SHORT) as load:
        time.sleep(0.3)
        before = hit_rate_over(url, 1.0)
        faults.inject(node_dir, "prefix-cache-cliff")
        time.sleep(0.6)  # requests already running keep the hits they were given
        during = hit_rate_over(url, 1.5)
        faults.clear(node_dir, "prefix-cache-cliff")
        time.sleep(0.6)
        after = hit_rate_over(url, 1.5)
    assert load.failed == 0
    assert before == pytest.approx(0.9, abs=0.02)
    assert during == pytest.approx(0.07, abs=0.02)
    assert after == pytest.approx(0.9, abs=0.02)


# ------------------------------------------------------------------------ RoCE counters


def nic_on(node_dir: Path, leaf: str) -> dict[str, Any]:
    return next(n for n in state.load(node_dir)["nics"] if n["neighbor"]["chassis"] == leaf)


def counters(node_dir: Path, nic: dict[str, Any]) -> dict[str, int]:
    text = roce_traffic.read(node_dir, nic["netdev"], time.time())
    assert text is not None
    values: dict[str, int] = roce_counters.parse_ethtool_stats(text)
    hw = sysfs_rdma.hw_counters_dir(node_dir / "sys", nic)
    values.update({p.name: int(p.read_text(encoding="utf-8")) for p in hw.iterdir()})
    return values


def grown(node_dir: Path, nics: list[dict[str, Any]], seconds: float) -> list[dict[str, int]]:
    first = [counters(node_dir, n) for n in nics]
    time.sleep(seconds)
    second = [counters(node_dir, n) for n in nics]
    return [{k: b[k] - a.get(k, 0) for k in b} for a, b in zip(first, second, strict=True)]


def retransmits(delta: dict[str, int]) -> int:
    return sum(delta[name] for name in roce_counters.RETRANSMIT_COUNTERS)


def test_serving_moves_the_roce_counters_and_a_leaf_without_pfc_retransmits(
    node_dir: Path, instances: list[str]
) -> None:
    nics = [nic_on(node_dir, "leaf01"), nic_on(node_dir, "leaf02")]
    idle = grown(node_dir, nics, 0.5)
    assert [d["rx_bytes_phy"] for d in idle] == [0, 0]
    with serving.ServingLoad(instances, max_tokens=SHORT) as load:
        time.sleep(0.3)
        healthy = grown(node_dir, nics, 1.0)
        faults_switch.inject_leaf(roce_traffic.leaf_file(node_dir, "leaf01"), "switch-pfc-off")
        lossy = grown(node_dir, nics, 1.0)
    assert load.failed == 0
    # ~0.4 of 400 Gb/s at ~90 % GPU load: gigabytes a second
    assert all(d["rx_bytes_phy"] > 5e9 and d["tx_bytes_phy"] > 5e9 for d in healthy)
    assert [retransmits(d) for d in healthy] == [0, 0]
    assert retransmits(lossy[0]) > 0 and lossy[0]["rx_discards_phy"] > 0  # leaf01 no longer pauses
    assert retransmits(lossy[1]) == 0  # leaf02 still lossless
