"""quarantine.UNSAFE: which failed checks make a serving node unsafe to serve, as the watch reports them
(its message and gpufleet_node_unsafe), and which are only reported (a PDU's power cap, a prefix-cache
cliff, RoCE counters): the classification a watch that acts (issue 39) takes nodes out by."""

from __future__ import annotations

import pytest

from gpufleet import checks, prom, quarantine, watch
from gpufleet.report import HostReport, Report
from gpufleet.runner import HostResult
from tests.unit.test_check_producers import PRODUCERS
from tests.unit.test_prom import L, series


def _failed(name: str, value: object = 1, limit: object = 0) -> dict[str, object]:
    return checks.check(name, False, value, limit, "", f"{name} failed")


def _passed(name: str) -> dict[str, object]:
    return checks.check(name, True, 0, 0, "", f"{name} passed")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("health.gpu_count", "gpu_lost"),
        ("health.xid[0000:1b:00.0]", "xid"),
        ("health.recovery_action[GPU-a]", "recovery_action"),
        ("health.ecc_uncorrectable[GPU-a]", "ecc_uncorrectable"),
        ("health.row_remap_failure[GPU-a]", "row_remap"),
        ("health.row_remap_pending[GPU-a]", "row_remap"),
        ("health.nvlink[GPU-a]", "nvlink"),
        ("rdma_link.link_state[mlx5_3]", "roce_port_down"),
        ("thermal.hotspot_c[GPU-a]", "thermal"),
        ("coolant.flow_lpm[loop0]", "coolant"),
        ("coolant.leak[board0]", "coolant"),
    ],
)
def test_each_unsafe_failure_names_its_class(name: str, cls: str) -> None:
    assert quarantine.unsafe_classes([_passed("health.pcie_width[GPU-a]"), _failed(name)]) == {cls: [name]}


@pytest.mark.parametrize(
    "name",
    [
        # the PDU capped the GPUs: the node is slower, not wrong, and the cause is upstream
        "gpu_power.enforced_limit_w[GPU-a]",
        # a prompt template broke the prefix cache: nothing on the node is at fault
        "service.prefix_cache_hit_rate[vllm-0]",
        "fabric.retransmits[mlx5_0]",
        "fabric.symbol_errors[mlx5_0]",
        "fabric.link_flaps[mlx5_0]",
        "health.pcie_replays[GPU-a]",
        "thermal.clocks_event_reasons[GPU-a]",
        # the NIC's firmware logged an error: reported (a port it takes down is rdma_link.link_state)
        "fabric.mlx5_firmware[mlx5_1]",
        # the BMC could not be read: nothing is known of the loop, which is not a failure of the node
        "coolant.bmc[node01]",
    ],
)
def test_a_failure_that_does_not_make_the_node_unsafe_is_only_reported(name: str) -> None:
    assert quarantine.unsafe_classes([_failed(name)]) == {}


def test_passed_checks_of_an_unsafe_family_are_not_counted() -> None:
    assert quarantine.unsafe_classes([_passed("health.xid[0000:1b:00.0]"), _passed("health.gpu_count")]) == {}


def test_classes_come_in_one_order_with_every_failed_check_named() -> None:
    found = [
        _failed("rdma_link.link_state[mlx5_1]"),
        _failed("health.xid[0000:2a:00.0]"),
        _failed("rdma_link.link_state[mlx5_0]"),
        _failed("health.gpu_count", 15, 16),
    ]
    classes = quarantine.unsafe_classes(found)
    assert list(classes) == ["gpu_lost", "xid", "roce_port_down"]
    assert classes["roce_port_down"] == ["rdma_link.link_state[mlx5_1]", "rdma_link.link_state[mlx5_0]"]
    assert quarantine.describe(classes) == (
        "a GPU is missing from the node; the driver logged an Xid that needs a reset or more; "
        "a RoCE port is down"
    )


def test_every_unsafe_family_is_a_check_the_code_produces() -> None:
    """A renamed check would silently stop taking nodes out: each family must be one PRODUCERS knows."""
    produced = {name.removesuffix("[]") for name in PRODUCERS}
    families = [f for cls in quarantine.UNSAFE for f in cls.families]
    assert sorted(f for f in families if f not in produced) == []
    assert len(families) == len(set(families)), "a family in two classes"


def test_the_watch_says_unsafe_to_serve_and_why_and_not_for_a_power_cap() -> None:
    tasks = [
        {
            "task": "Look at the node in service",
            "outcome": "ok",
            "checks": [_failed("health.gpu_count", 15, 16), _failed("gpu_power.enforced_limit_w[GPU-a]")],
        }
    ]
    host = watch.watch_host(HostResult.from_tasks("node01", tasks))
    assert host.message.startswith(
        "unsafe to serve (a GPU is missing from the node): health.gpu_count failed"
    )
    capped = [{"task": "Look", "outcome": "ok", "checks": [_failed("gpu_power.enforced_limit_w[GPU-a]")]}]
    assert watch.watch_host(HostResult.from_tasks("node02", capped)).message == (
        "gpu_power.enforced_limit_w[GPU-a] failed"
    )


def test_the_watch_file_has_the_unsafe_nodes_and_their_classes() -> None:
    report = Report(command="watch", started="2026-12-06T10:00:00Z", finished="2026-12-06T10:00:05Z")
    report.hosts["node01"] = HostReport(status="failed", checks=[_failed("health.xid[0000:1b:00.0]", 79)])
    report.hosts["node02"] = HostReport(
        status="failed", checks=[_failed("gpu_power.enforced_limit_w[GPU-a]")]
    )
    report.hosts["node03"] = HostReport(status="ok", checks=[_passed("health.gpu_count")])
    text = prom.render(report)
    assert series(text, "gpufleet_node_unsafe", command="watch") == {
        L(host="node01"): 1.0,
        L(host="node02"): 0.0,
        L(host="node03"): 0.0,
    }
    assert series(text, "gpufleet_node_unsafe_class", command="watch") == {
        L(host="node01", **{"class": "xid"}): 1.0
    }


def test_other_commands_write_no_unsafe_series() -> None:
    """The gate blocks a node itself; only the watch (in service) says what it would take out."""
    report = Report(command="gate", started="2026-12-06T10:00:00Z", finished="2026-12-06T10:10:00Z")
    report.hosts["node01"] = HostReport(status="blocked", checks=[_failed("health.xid[0000:1b:00.0]", 79)])
    assert "gpufleet_node_unsafe" not in prom.render(report)
