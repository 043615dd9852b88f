"""The simulator's nic-link-flap-once fault (issue 38 item 5): the last RoCE port retrains once, when
the load's traffic first crosses it after the inject, then holds; counted where mlx5 and Linux count a
flap (ethtool -S link_down_events_phy, sysfs carrier_down_count and carrier_up_count, the kernel log)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import roce_counters
from gpufleet_sim import faults, link_flap, roce_traffic, state, thermal
from gpufleet_sim.tools import dmesg

from tests.unit.sim.fake_node import build_nodes, node_fixture, run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_nodes(tmp_path_factory, ("b300-16",))


b300 = node_fixture("b300-16", "built")


def test_the_port_flaps_once_under_load_then_holds(b300: Path) -> None:
    last = max(state.load(b300)["nics"], key=lambda n: n["slot"])
    net = b300 / "sys" / "class" / "net" / last["netdev"]

    def read(at: float) -> tuple[int, int, int]:
        stats = roce_counters.parse_ethtool_stats(roce_traffic.read(b300, last["netdev"], at) or "")
        down, up = ((net / name).read_text() for name in ("carrier_down_count", "carrier_up_count"))
        assert (net / "operstate").read_text() == "up\n"
        return stats["link_down_events_phy"], int(down), int(up)

    now = 1_800_000_000.0
    assert faults.inject(b300, "nic-link-flap-once")
    # armed: idle reads count nothing, however long it waits
    assert read(now) == (0, 0, 0)
    assert read(now + 100) == (0, 0, 0)
    with state.locked(b300) as node:
        thermal.change_load(node, [g["uuid"] for g in node["gpus"]], 4, now + 101)
    # the first read under load: the link retrained once
    assert read(now + 102) == (1, 1, 1)
    # and holds, under load for longer than nic-link-flap's period many times over
    assert read(now + 102 + 20 * link_flap.FLAP_PERIOD_S) == (1, 1, 1)
    _, log, _ = run(dmesg, b300)
    assert log.splitlines()[-2].endswith(f"{last['netdev']}: Link down")
    assert sum(line.endswith("Link down") for line in log.splitlines()) == 1
    others = [n for n in state.load(b300)["nics"] if n["slot"] != last["slot"]]
    assert all(int(n.get("carrier_down_count", 0)) == 0 for n in others)
    assert faults.clear(b300, "nic-link-flap-once") == ["nic-link-flap-once"]
    assert read(now + 1000) == (1, 1, 1)
    assert "flap" not in next(n for n in state.load(b300)["nics"] if n["slot"] == last["slot"])


def test_a_cleared_fault_that_never_saw_load_never_flaps(b300: Path) -> None:
    last = max(state.load(b300)["nics"], key=lambda n: n["slot"])
    assert faults.inject(b300, "nic-link-flap-once")
    assert faults.clear(b300, "nic-link-flap-once") == ["nic-link-flap-once"]
    with state.locked(b300) as node:
        thermal.change_load(node, [g["uuid"] for g in node["gpus"]], 4, 1_800_000_000.0)
    stats = roce_counters.parse_ethtool_stats(roce_traffic.read(b300, last["netdev"], 1_800_000_010.0) or "")
    assert stats["link_down_events_phy"] == 0
