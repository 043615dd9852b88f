"""vLLM instances as systemd services on simulated nodes: they run, serve, load their GPUs, heat them."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from gpufleet_sim import faults, state
from gpufleet_sim.fleet import Fleet

from tests.integration.conftest import node_ssh

SUBNET = "127.0.32"
NODES = {"node01": f"{SUBNET}.2", "node02": f"{SUBNET}.3"}
PORTS = {"glm52": 8000, "kimik3": 8001}
UNIT = """[Unit]
Description=vLLM instance %i
After=nvidia-persistenced.service
ConditionPathExists=/run/gpufleet/gate-passed

[Service]
Type=exec
EnvironmentFile=/etc/gpufleet/vllm-%i.env
ExecStart=/usr/local/sbin/vllm serve ${MODEL} --tensor-parallel-size 8 --max-model-len 65536 \
--max-num-seqs 512 --max-num-batched-tokens 5120 --gpu-memory-utilization 0.90 --enable-prefix-caching \
--swap-space 8 --trust-remote-code --served-model-name %i --host 0.0.0.0 --port ${PORT}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def fleet(fleet_factory: Any) -> Fleet:
    started: Fleet = fleet_factory(nodes=2, subnet=SUBNET)
    for name in NODES:
        with state.locked(started.root / "nodes" / name) as current:
            current["serving"]["startup_s"] = 0.5
        for domain, instance in enumerate(PORTS):
            install(started, name, instance, domain)
    return started


def ssh(fleet: Fleet, node: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return node_ssh(fleet, NODES[node], command, check)


def uuids(fleet: Fleet, node: str, domain: int) -> list[str]:
    current = state.load(fleet.root / "nodes" / node)
    return [g["uuid"] for g in state.present_gpus(current) if g["nvlink_domain"] == domain]


def install(fleet: Fleet, node: str, instance: str, domain: int, devices: str | None = None) -> None:
    env = f"MODEL=org/{instance}-NVFP4\nPORT={PORTS.get(instance, 8009)}\nCUDA_DEVICE_ORDER=PCI_BUS_ID\n"
    env += f"CUDA_VISIBLE_DEVICES={devices or ','.join(uuids(fleet, node, domain))}\n"
    script = (
        f"mkdir -p /etc/gpufleet && printf '%s' '{env}' > /etc/gpufleet/vllm-{instance}.env && "
        f"printf '%s' '{UNIT}' > /etc/systemd/system/vllm@.service && systemctl daemon-reload"
    )
    ssh(fleet, node, script)


def url(node: str, instance: str, path: str) -> str:
    return f"http://{NODES[node]}:{PORTS[instance]}{path}"


def call(target: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(target, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return response.status, json.loads(raw) if raw else None


def wait_healthy(node: str, instance: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if call(url(node, instance, "/health"))[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            assert time.monotonic() < deadline, f"{instance} on {node} did not become healthy"
            time.sleep(0.1)


def refused(node: str, instance: str) -> bool:
    try:
        call(url(node, instance, "/health"))
    except urllib.error.URLError as err:
        return isinstance(err.reason, ConnectionRefusedError)
    return False


def smi(fleet: Fleet, node: str, fields: str) -> list[list[str]]:
    out = ssh(fleet, node, f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits").stdout
    return [[v.strip() for v in line.split(",")] for line in out.splitlines()]


def test_the_gate_marker_condition_keeps_an_instance_down(fleet: Fleet) -> None:
    assert ssh(fleet, "node01", "systemctl start vllm@glm52").returncode == 0
    assert ssh(fleet, "node01", "systemctl is-active vllm@glm52", check=False).stdout.strip() == "inactive"
    show = ssh(fleet, "node01", "systemctl show vllm@glm52").stdout
    assert "ConditionResult=no" in show and "ActiveState=inactive" in show
    assert refused("node01", "glm52")


def test_instances_serve_on_each_nodes_own_address_and_stop(fleet: Fleet) -> None:
    for node in NODES:
        ssh(fleet, node, "mkdir -p /run/gpufleet && touch /run/gpufleet/gate-passed")
        ssh(fleet, node, "systemctl start vllm@glm52 vllm@kimik3")
    # both nodes serve the same ports, each on its own address
    for node in NODES:
        for instance in PORTS:
            wait_healthy(node, instance)
            assert call(url(node, instance, "/v1/models"))[1]["data"][0]["id"] == instance
    active = ssh(fleet, "node01", "systemctl is-active vllm@glm52 vllm@kimik3").stdout.split()
    assert active == ["active", "active"]
    show = dict(
        line.split("=", 1) for line in ssh(fleet, "node01", "systemctl show vllm@glm52").stdout.splitlines()
    )
    assert show["SubState"] == "running" and int(show["MainPID"]) > 1
    assert ssh(fleet, "node01", f"kill -0 {show['MainPID']}").returncode == 0
    log = ssh(fleet, "node01", "cat /run/log/units/vllm@glm52.service.log").stdout
    assert f"Uvicorn running on http://{NODES['node01']}:8000" in log
    # each instance holds memory on its own baseboard only
    memory = {row[0]: int(row[1]) for row in smi(fleet, "node01", "uuid,memory.used")}
    assert {memory[u] for u in uuids(fleet, "node01", 0) + uuids(fleet, "node01", 1)} == {round(0.9 * 275040)}

    # a request loads exactly the instance's GPUs while it runs
    body = {"model": "kimik3", "prompt": "hello", "max_tokens": 150}
    worker = threading.Thread(target=call, args=(url("node01", "kimik3", "/v1/completions"), body))
    worker.start()
    time.sleep(0.6)
    util = {row[0]: int(row[1]) for row in smi(fleet, "node01", "uuid,utilization.gpu")}
    worker.join()
    assert {util[u] for u in uuids(fleet, "node01", 1)} == {75} and {
        util[u] for u in uuids(fleet, "node01", 0)
    } == {0}

    assert ssh(fleet, "node01", "systemctl stop vllm@glm52").returncode == 0
    assert ssh(fleet, "node01", "systemctl is-active vllm@glm52", check=False).stdout.strip() == "inactive"
    assert ssh(fleet, "node01", f"kill -0 {show['MainPID']}", check=False).returncode != 0
    assert refused("node01", "glm52") and call(url("node02", "glm52", "/health"))[0] == 200
    memory = {row[0]: int(row[1]) for row in smi(fleet, "node01", "uuid,memory.used")}
    assert {memory[u] for u in uuids(fleet, "node01", 0)} == {0}


def test_an_instance_pinned_to_missing_gpus_fails(fleet: Fleet) -> None:
    install(fleet, "node01", "broken", 0, devices="GPU-00000000-dead-beef-0000-000000000000")
    ssh(fleet, "node01", "sed -i 's/^Restart=.*/Restart=no/' /etc/systemd/system/vllm@.service")
    try:
        ssh(fleet, "node01", "systemctl start vllm@broken")
        deadline = time.monotonic() + 10
        while ssh(fleet, "node01", "systemctl is-active vllm@broken", check=False).stdout.strip() != "failed":
            assert time.monotonic() < deadline, "the unit did not fail"
            time.sleep(0.1)
        log = ssh(fleet, "node01", "cat /run/log/units/vllm@broken.service.log").stdout
        assert "RuntimeError: No CUDA GPUs are available" in log
    finally:
        ssh(fleet, "node01", "sed -i 's/^Restart=.*/Restart=on-failure/' /etc/systemd/system/vllm@.service")


def test_low_flow_throttles_a_serving_node_under_sustained_load(fleet: Fleet) -> None:
    node = "node02"
    faults.inject(fleet.root / "nodes" / node, "low-coolant-flow")
    before = smi(fleet, node, "index,temperature.gpu,clocks_event_reasons.active")
    assert all(int(row[1]) < 45 and row[2] == "0x0000000000000001" for row in before)  # idle looks fine
    target, body = url(node, "glm52", "/v1/completions"), {"prompt": "warm up the plates", "max_tokens": 40}
    stop, latencies = threading.Event(), []

    def load() -> None:
        while not stop.is_set():
            started = time.monotonic()
            call(target, body)
            latencies.append(time.monotonic() - started)

    workers = [threading.Thread(target=load) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        time.sleep(40)
        rows = smi(
            fleet,
            node,
            "uuid,temperature.gpu,temperature.gpu.tlimit,clocks.sm,clocks_event_reasons.sw_thermal_slowdown",
        )
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    loaded = set(uuids(fleet, node, 0))
    hot = [row for row in rows if row[0] in loaded]
    assert all(
        int(t) >= 85 and int(tl) <= 0 and int(sm) < 1965 * 0.8 and r == "Active" for _, t, tl, sm, r in hot
    )
    assert all(int(row[1]) < 50 for row in rows if row[0] not in loaded)
    # throttled GPUs serve slower: the last requests took well longer than the first ones
    assert sum(latencies[-4:]) > 1.3 * sum(latencies[:4])
    faults.clear(fleet.root / "nodes" / node, "low-coolant-flow")


def test_prefix_cache_cliff_shows_in_metrics(fleet: Fleet) -> None:
    target = url("node02", "kimik3", "/v1/completions")
    for _ in range(5):
        call(target, {"prompt": "s" * 800, "max_tokens": 1})
    faults.inject(fleet.root / "nodes" / "node02", "prefix-cache-cliff")
    try:
        with urllib.request.urlopen(url("node02", "kimik3", "/metrics"), timeout=10) as response:
            before = response.read().decode()
        for _ in range(20):
            call(target, {"prompt": "s" * 800, "max_tokens": 1})
        with urllib.request.urlopen(url("node02", "kimik3", "/metrics"), timeout=10) as response:
            after = response.read().decode()
    finally:
        faults.clear(fleet.root / "nodes" / "node02", "prefix-cache-cliff")

    def value(text: str, name: str) -> float:
        line = next(line for line in text.splitlines() if line.startswith(name + "{"))
        return float(line.rsplit(" ", 1)[1])

    hits = value(after, "vllm:prefix_cache_hits_total") - value(before, "vllm:prefix_cache_hits_total")
    queries = value(after, "vllm:prefix_cache_queries_total") - value(
        before, "vllm:prefix_cache_queries_total"
    )
    # vLLM 0.11 has no V0 hit-rate gauge; the lifetime ratio it used to show is the counters'
    assert "vllm:gpu_prefix_cache_hit_rate" not in before
    lifetime = value(before, "vllm:prefix_cache_hits_total") / value(
        before, "vllm:prefix_cache_queries_total"
    )
    assert lifetime == pytest.approx(0.9)
    assert hits / queries == pytest.approx(0.07, abs=0.002)


def test_a_reboot_stops_instances_and_the_gate_marker_keeps_them_down(fleet: Fleet) -> None:
    ssh(fleet, "node01", "systemctl enable vllm@kimik3")
    wait_healthy("node01", "kimik3")
    fleet.reboot("node01")
    # /run is lost at a reboot, so the gate's marker is gone and the enabled unit is skipped
    assert ssh(fleet, "node01", "systemctl is-active vllm@kimik3", check=False).stdout.strip() == "inactive"
    assert refused("node01", "kimik3")
    memory = {int(row[0]) for row in smi(fleet, "node01", "memory.used")}
    assert memory == {0}
