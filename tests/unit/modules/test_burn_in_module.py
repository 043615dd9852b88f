"""gpufleet.node.burn_in: exact nvidia-smi argv, real load on a local stand-in, failures, check mode.

nvidia-smi answers come from the simulator's fake nvidia-smi on a b300-16 node directory, which a
test heats between samples; the completions go to FakeVllm on 127.0.0.1.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi as smi_queries
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read
from ansible_collections.gpufleet.node.plugins.modules import burn_in
from gpufleet_sim import build, faults_gpu, faults_health, kernel_log, state
from gpufleet_sim.tools import dmesg, nvidia_smi

from tests.unit.module_utils.thermal.test_burn_in import FakeVllm
from tests.unit.modules import harness, rocenode

SMI = "/usr/bin/nvidia-smi"
# The burn-in's one query a sample: the watch sample (temperatures, reasons, power limits, reason counters).
QUERY = smi_queries.watch_query(SMI)


class Node:
    """A b300-16 node whose fake nvidia-smi answers the module; ``heat`` runs before each sample."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir()
        state.save(directory, build.build_node_state("node01", "b300-16", 1))
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.heat: Callable[[state.State, int], None] | None = None
        self.rc_after: int | None = None

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        self.calls.append((list(args), kwargs))
        n = len(self.calls)
        if self.rc_after is not None and n > self.rc_after:
            return 15, "", "Unable to determine the device handle for GPU0000:19:00.0: GPU is lost.\n"
        if self.heat is not None:
            node = state.load(self.dir)
            self.heat(node, n)
            state.save(self.dir, node)
        out = io.StringIO()
        with redirect_stdout(out):
            rc = nvidia_smi.main(list(args[1:]), self.dir)
        return rc, out.getvalue(), ""


@pytest.fixture(autouse=True)
def no_rdma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node without RDMA devices (whatever the machine running the tests has): no RoCE port to watch.
    The RoCE tests below give the module a node with ports."""
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(tmp_path / "no-rdma"))


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path / "node")


@pytest.fixture
def vllm() -> Iterator[FakeVllm]:
    with FakeVllm() as server:
        yield server


def run_module(args: dict[str, Any], node: Node) -> tuple[dict[str, Any], Any]:
    run = harness.run_module(burn_in.main, args, run_command=node, get_bin_path=SMI)
    return run.result, run.which


def fast(vllm: FakeVllm, **extra: Any) -> dict[str, Any]:
    """A short burn-in; the PCIe sample under load only where a test asks for it (test_node_health)."""
    return {
        "ports": [vllm.port],
        "seconds": 2,
        "sample_interval": 0.2,
        "concurrency": 2,
        "max_tokens": 4,
        "pcie": False,
        # the health read when the load ends: its own tests below
        "health": False,
        **extra,
    }


def test_healthy_node_passes(node: Node, vllm: FakeVllm) -> None:
    result, which = run_module(fast(vllm), node)
    assert "failed" not in result and result["changed"] is False
    which.assert_called_once_with(mock.ANY, "nvidia-smi")
    assert {tuple(args) for args, _ in node.calls} == {tuple(QUERY)}
    assert all(kwargs == {"environ_update": {"LC_ALL": "C"}} for _, kwargs in node.calls)
    assert 8 <= result["samples"]["count"] == len(node.calls) <= 11
    assert result["first_bad_sample"] is None and result["stopped_early"] is False
    stats = result["requests"][vllm.url]
    assert stats["ok"] > 0 and stats["failed"] == 0 and stats["model"] == "GLM-5.2-NVFP4"
    names = [c["name"] for c in result["checks"]]
    assert names[0] == "burn_in.samples" and names[-1] == f"burn_in.requests[{vllm.url}]"
    # per GPU: 3 temperatures, its reasons, its enforced power limit
    assert len(names) == 1 + 16 * 5 + 1 and all(c["ok"] for c in result["checks"])
    assert result["samples"]["gpus"][node_uuid(node, 0)]["max_gpu_c"] == 31
    assert result["msg"].startswith("burn-in passed: ")


def node_uuid(node: Node, index: int) -> str:
    return str(state.load(node.dir)["gpus"][index]["uuid"])


def test_throttling_under_load_fails_with_the_first_bad_sample(node: Node, vllm: FakeVllm) -> None:
    """GPU 3 warms up sample by sample and starts SW thermal slowdown at its max operating temperature."""

    def heat(node_state: state.State, n: int) -> None:
        gpu = node_state["gpus"][3]
        gpu["temperature"]["gpu_c"] = 70 + 4 * n
        if gpu["temperature"]["gpu_c"] >= 85:
            gpu["clocks_event_reasons"] = ["sw_thermal_slowdown"]

    node.heat = heat
    uuid = node_uuid(node, 3)
    result, _ = run_module(fast(vllm, seconds=30), node)
    assert result["failed"] is True and result["stopped_early"] is True
    # Sample 3 reads 82 C (T.Limit 3, at the limit); sample 4 is 86 C: past 83 C, T.Limit -1, throttling.
    assert len(node.calls) == 4
    bad = result["first_bad_sample"]
    assert (bad["uuid"], bad["reading"], bad["value"], bad["limit"]) == (uuid, "temperature.gpu", 86, 83.0)
    assert 0.5 <= bad["t"] <= 1.5
    failed = {c["name"]: c for c in result["checks"] if not c["ok"]}
    assert set(failed) == {
        f"thermal.gpu_temp_c[{uuid}]",
        f"thermal.tlimit_c[{uuid}]",
        f"thermal.clocks_event_reasons[{uuid}]",
    }
    assert failed[f"thermal.clocks_event_reasons[{uuid}]"]["value"] == ["sw_thermal_slowdown"]
    assert failed[f"thermal.tlimit_c[{uuid}]"]["value"] == -1
    assert f"First bad sample at {bad['t']}s: {uuid} temperature.gpu = 86 (limit 83.0)." in result["msg"]
    assert "Keep the instances stopped" in result["msg"]
    # The load stopped with the burn-in, well before its 30 s.
    assert result["duration_s"] < 5


def test_per_profile_limits_and_skips(node: Node, vllm: FakeVllm) -> None:
    result, _ = run_module(fast(vllm, max_gpu_temp_c=30.0, skip_checks=["memory_temp_c", "tlimit_c"]), node)
    assert result["failed"] is True
    assert (
        result["first_bad_sample"]["reading"] == "temperature.gpu"
        and result["first_bad_sample"]["limit"] == 30.0
    )
    assert not any("memory_temp_c" in c["name"] or "tlimit_c" in c["name"] for c in result["checks"])


def test_nvidia_smi_failing_mid_run(node: Node, vllm: FakeVllm) -> None:
    node.rc_after = 2
    result, _ = run_module(fast(vllm, seconds=30), node)
    assert result["failed"] is True and result["stopped_early"] is True
    bad = result["first_bad_sample"]
    assert bad["reading"] == "nvidia-smi" and "GPU is lost" in bad["value"]
    assert result["checks"][0]["name"] == "burn_in.samples" and result["checks"][0]["ok"] is False


def test_failing_requests_fail_the_burn_in(node: Node, vllm: FakeVllm) -> None:
    vllm.completion_status = 503
    result, _ = run_module(fast(vllm), node)
    assert result["failed"] is True
    check = result["checks"][-1]
    assert check["name"] == f"burn_in.requests[{vllm.url}]" and check["ok"] is False
    assert "last: HTTP 503" in check["message"] and "no load reached it" in check["message"]


def test_dead_instance_fails_before_any_load(node: Node) -> None:
    with FakeVllm() as gone:
        port = gone.port
    result, _ = run_module({"ports": [port], "seconds": 2}, node)
    assert result["failed"] is True and node.calls == []
    assert f"http://127.0.0.1:{port} did not list its models" in result["msg"]


def test_check_mode_sends_nothing(node: Node, vllm: FakeVllm) -> None:
    result, _ = run_module({**fast(vllm), "_ansible_check_mode": True}, node)
    assert result["skipped"] is True and result["changed"] is False
    assert node.calls == [] and vllm.paths == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"urls": ["127.0.0.1:8000"]}, "must be http(s) base URLs"),
        ({"ports": [8000], "seconds": 0}, "must be 1 or more"),
        ({"ports": []}, "no instance to load"),
        ({"ports": [8000], "urls": ["http://x"]}, "mutually exclusive"),
    ],
)
def test_bad_arguments(node: Node, args: dict[str, Any], message: str) -> None:
    result, _ = run_module(args, node)
    assert result["failed"] is True and message in result["msg"]
    assert node.calls == []


# ---------------------------------------------------------------- the RoCE ports under the load (issue 12 §3)


class RoceBurnIn(rocenode.RoceNode):
    """The simulator's node with its leaves (rocenode.py) behind run_command: nvidia-smi and ethtool are
    its fake tools, on the real clock; the burn-in's load is on its GPUs while the module runs."""

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if args[0] == SMI:
            self.calls.append((list(args), kwargs))
            out = io.StringIO()
            with redirect_stdout(out):
                rc = nvidia_smi.main(list(args[1:]), self.dir)
            return rc, out.getvalue(), ""
        return self.run_command(args, **kwargs)

    def which(self, module: Any, name: str, *args: Any, **kwargs: Any) -> str | None:
        return {"nvidia-smi": SMI, "ethtool": rocenode.ETHTOOL}.get(name)


@pytest.fixture
def roce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RoceBurnIn:
    node = RoceBurnIn(tmp_path)
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", node.root)
    node.now = time.time()
    node.load(4)  # what the instances' requests do to the node's GPUs (the fake vLLM's change_load)
    return node


def run_roce(roce: RoceBurnIn, args: dict[str, Any]) -> dict[str, Any]:
    run = harness.run_module(burn_in.main, args, run_command=roce, get_bin_path=roce.which)
    return run.result


def test_roce_ports_are_read_when_the_load_starts_and_when_it_stops(roce: RoceBurnIn, vllm: FakeVllm) -> None:
    result = run_roce(roce, fast(vllm))
    assert "failed" not in result, result["msg"]
    ethtool = [
        ([rocenode.ETHTOOL, "-S", p["netdev"]], {"environ_update": {"LC_ALL": "C"}}) for p in roce.ports()
    ]
    # eight ethtool -S before the first sample, eight after the last, nothing else but the samples
    assert roce.calls[:8] == ethtool and roce.calls[-8:] == ethtool
    assert {tuple(args) for args, _ in roce.calls[8:-8]} == {tuple(QUERY)}
    fabric = [c for c in result["checks"] if c["name"].startswith(("fabric.", "rdma_link."))]
    # per port: 8 counter checks, its link's state, rate and flaps, its physical layer's symbol
    # errors, link integrity and buffer overruns, its share of the traffic
    assert len(fabric) == 15 * 8 and all(c["ok"] for c in fabric)
    assert result["checks"][-1]["name"].startswith("fabric.")  # after the thermal and request checks
    assert result["roce"]["links"]["mlx5_7"]["end"] == {
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "rate_gbps": 400,
    }
    summary = result["roce"]
    assert summary["ports"] == roce.ports() and summary["error"] is None
    # the window brackets the 2 s load (a loaded machine stretches it: no upper bound worth timing here)
    assert summary["window_s"] >= 1.5
    assert (
        summary["deltas"]["mlx5_0"]["np_cnp_sent"] > 0 and summary["deltas"]["mlx5_0"]["out_of_sequence"] == 0
    )


def test_switch_pfc_off_fails_the_burn_in_through_the_counters(roce: RoceBurnIn, vllm: FakeVllm) -> None:
    roce.leaf("leaf01", rocenode.switch_pfc_off)
    result = run_roce(roce, fast(vllm))
    assert result["failed"] is True
    failed = {c["name"] for c in result["checks"] if not c["ok"]}
    leaf01 = roce.on_leaf("leaf01")
    assert failed == {f"fabric.retransmits[{d}]" for d in leaf01} | {
        f"fabric.rx_discards[{d}]" for d in leaf01
    }
    assert result["msg"].startswith(f"burn-in failed after {result['duration_s']}s: {leaf01[0]} over ")
    assert result["msg"].endswith(
        "Keep the instances stopped and check the RoCE path (host and switch PFC, ECN, DSCP map and MTU) "
        "before admitting traffic"
    )


def test_roce_ports_off_reads_no_counter(roce: RoceBurnIn, vllm: FakeVllm) -> None:
    roce.leaf("leaf01", rocenode.switch_pfc_off)
    result = run_roce(roce, fast(vllm, roce_ports=False))
    assert "failed" not in result and result["roce"] is None
    assert {tuple(args) for args, _ in roce.calls} == {tuple(QUERY)}


def test_unreadable_counters_fail_the_burn_in_naming_the_tool(roce: RoceBurnIn, vllm: FakeVllm) -> None:
    roce.answers[(rocenode.ETHTOOL, "-S", "ens55np0")] = (0, "NIC statistics:\n     rx_packets: -1\n", "")
    result = run_roce(roce, fast(vllm))
    assert result["failed"] is True
    (check,) = [c for c in result["checks"] if not c["ok"]]
    assert check["name"] == "burn_in.roce_counters"
    assert check["message"].startswith(
        "the RoCE ports' counters could not be read: "
        "could not read the output of ethtool -S ens55np0: ethtool -S: "
    )
    assert result["roce"]["error"] == check["value"]
    # the first reading failed: nothing more was read, and the load ran its time
    assert len([a for a, _ in roce.calls if a[0] == rocenode.ETHTOOL]) == 3
    assert result["stopped_early"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"roce_priority": 9}, "roce_priority is 9; the RoCE priority is 0..7"),
        ({"roce_thresholds": {"pauses": 1}}, "roce_thresholds: pauses is not a threshold"),
    ],
)
def test_bad_roce_options(roce: RoceBurnIn, vllm: FakeVllm, args: dict[str, Any], message: str) -> None:
    result = run_roce(roce, fast(vllm, **args))
    assert result["failed"] is True and result["msg"].startswith(message)
    assert roce.calls == []


def test_a_pdu_cap_during_the_burn_in_fails_it_naming_the_power_budget(node: Node, vllm: FakeVllm) -> None:
    """Issue 25: the burn-in's own samples showed the draw held at 1100 W against a 1400 W request and
    the gate admitted the node (its one idle power read fell in an uncapped half). Every sample now
    carries the enforced and requested limits."""

    def cap(node_state: state.State, n: int) -> None:
        if n >= 3:
            for gpu in node_state["gpus"]:
                gpu["power"]["enforced_limit_w"] = gpu["power"]["requested_limit_w"] - 300.0

    node.heat = cap
    result, _ = run_module(fast(vllm, seconds=30), node)
    assert result["failed"] is True and result["stopped_early"] is True
    bad = result["first_bad_sample"]
    assert (bad["reading"], bad["value"], bad["limit"]) == ("enforced.power.limit", 1100.0, 1400.0)
    power = {c["name"]: c for c in result["checks"] if c["name"].startswith("gpu_power.enforced_limit_w[")}
    assert len(power) == 16
    for c in power.values():
        assert (c["ok"], c["value"], c["limit"], c["unit"]) == (False, 1100.0, 1400.0, "W")
        assert "the rack's power budget" in c["message"] and "in 1 of 3 samples" in c["message"]


# ---------------------------------------------------------------- the node's health when the load ends


class HealthNode(Node):
    """A node whose dmesg is the simulator's too (its kernel log), and whose tools sit in /usr/bin."""

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if Path(args[0]).name != "dmesg":
            return super().__call__(module, args, **kwargs)
        self.calls.append((list(args), kwargs))
        if self.dmesg_rc:
            return self.dmesg_rc, "", "dmesg: read kernel buffer failed: Operation not permitted\n"
        out = io.StringIO()
        with redirect_stdout(out):
            rc = dmesg.main(list(args[1:]), self.dir)
        return rc, out.getvalue(), ""

    dmesg_rc = 0

    @staticmethod
    def which(module: Any, name: str, *args: Any, **kwargs: Any) -> str:
        return f"/usr/bin/{name}"


@pytest.fixture
def health_node(tmp_path: Path) -> HealthNode:
    return HealthNode(tmp_path / "node")


def run_health(node: HealthNode, vllm: FakeVllm, **extra: Any) -> dict[str, Any]:
    args = fast(vllm, health=True, expected_gpu_count=16, **extra)
    return harness.run_module(burn_in.main, args, run_command=node, get_bin_path=node.which).result


def during_the_load(
    fault: Callable[[state.State, Path], None], at: int
) -> Callable[[state.State, int], None]:
    """The fault applied before the ``at``-th tool call, while the load runs."""

    def heat(node_state: state.State, n: int) -> None:
        if n == at:
            fault(node_state, Path("/nonexistent-sys"))

    return heat


def health_checks(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"] if c["name"].startswith(("health.", "burn_in.health"))}


def failed_health(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: c for n, c in health_checks(result).items() if not c["ok"]}


def run_with_fault_during_the_load(
    node: HealthNode, vllm: FakeVllm, fault: Callable[[state.State, Path], None]
) -> dict[str, Any]:
    """The burn-in's result with ``fault`` applied before the third tool call, while the load runs."""
    node.heat = during_the_load(fault, 3)
    return run_health(node, vllm)


def test_a_healthy_node_is_judged_again_when_the_load_ends(health_node: HealthNode, vllm: FakeVllm) -> None:
    result = run_health(health_node, vllm)
    assert "failed" not in result, result["msg"]
    argv = [args for args, _ in health_node.calls]
    # the kernel log read before the first sample and again after the last, with -q -x and nvlink -s
    assert argv[0] == ["/usr/bin/dmesg"] and argv[-1] == ["/usr/bin/dmesg"]
    assert ["/usr/bin/nvidia-smi", "-q", "-x"] in argv and ["/usr/bin/nvidia-smi", "nvlink", "-s"] in argv
    checks = health_checks(result)
    assert checks["health.gpu_count"]["value"] == 16 and all(c["ok"] for c in checks.values())
    assert len([n for n in checks if n.startswith("health.ecc_uncorrectable[")]) == 16
    assert result["health_after_load"]["gpu_count"] == 16 and result["health_after_load"]["xids"] == []


def test_a_gpu_that_falls_off_the_bus_during_the_load_fails_the_burn_in(
    health_node: HealthNode, vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults_gpu.sysfs, "remove_gpu", lambda *a: None)  # no sysfs in this node
    result = run_with_fault_during_the_load(health_node, vllm, faults_health.xid_79)
    assert result["failed"] is True
    failed = failed_health(result)
    assert (failed["health.gpu_count"]["value"], failed["health.gpu_count"]["limit"]) == (15, 16)
    (xid79,) = [c for n, c in failed.items() if n.startswith("health.xid[")]
    assert xid79["value"] == 79 and "during the burn-in" in xid79["message"]
    assert "have the GPUs the health checks name serviced" in result["msg"]
    assert "coolant" not in result["msg"]


def test_an_uncorrectable_ecc_error_during_the_load_fails_the_burn_in(
    health_node: HealthNode, vllm: FakeVllm
) -> None:
    uuid = node_uuid(health_node, faults_health.ECC_GPU)
    result = run_with_fault_during_the_load(health_node, vllm, faults_health.ecc_uncorrectable)
    assert result["failed"] is True
    failed = failed_health(result)
    assert list(failed) == [f"health.ecc_uncorrectable[{uuid}]"]
    assert (
        failed[f"health.ecc_uncorrectable[{uuid}]"]["value"],
        failed[f"health.ecc_uncorrectable[{uuid}]"]["limit"],
    ) == (2, 0)


def test_xid_94_during_the_load_fails_it_on_the_error_it_counted(
    health_node: HealthNode, vllm: FakeVllm
) -> None:
    uuid = node_uuid(health_node, faults_health.XID_94_GPU)
    result = run_with_fault_during_the_load(health_node, vllm, faults_health.xid_94)
    assert failed_health(result)[f"health.ecc_uncorrectable[{uuid}]"]["value"] == 1
    xids = [c for n, c in health_checks(result).items() if n.startswith("health.xid[")]
    assert [c["value"] for c in xids] == [94] and "during the burn-in" in xids[0]["message"]


def test_an_xid_logged_before_the_load_is_not_judged_again(health_node: HealthNode, vllm: FakeVllm) -> None:
    """node_health judged the kernel log since boot before the load; the burn-in, what came during it."""
    with state.locked(health_node.dir) as node_state:
        gpu = node_state["gpus"][0]
        kernel_log.append(node_state, time.time(), kernel_log.xid_79(gpu))
    result = run_health(health_node, vllm)
    assert "failed" not in result, result["msg"]
    assert not [n for n in health_checks(result) if n.startswith("health.xid[")]


def test_a_kernel_log_that_cannot_be_read_fails_the_burn_in(health_node: HealthNode, vllm: FakeVllm) -> None:
    health_node.dmesg_rc = 1
    result = run_health(health_node, vllm)
    assert result["failed"] is True
    failed = health_checks(result)["burn_in.health"]
    assert failed["ok"] is False and "when the load started" in failed["message"]
    assert "Operation not permitted" in failed["message"]


def test_bad_health_options_are_refused_naming_the_setting(health_node: HealthNode, vllm: FakeVllm) -> None:
    result = harness.run_module(
        burn_in.main,
        fast(vllm, health=True, max_volatile_uncorrectable_ecc=-1),
        run_command=health_node,
        get_bin_path=health_node.which,
        expect=harness.FailJson,
    ).result
    assert (
        result["input_error"] is True
        and "thermal_gate_health_max_volatile_uncorrectable_ecc" in result["msg"]
    )
    assert health_node.calls == []
