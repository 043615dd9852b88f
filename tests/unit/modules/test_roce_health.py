"""gpufleet.node.roce_health: exact argv (ethtool -S per port, twice), the checks of a healthy fabric under
load, a switch fault's named failure, check mode, failures that name the tool.

The node and its leaves are the simulator's (rocenode.py); the module's clock and sleep are the node's,
so the window is exact and the test does not wait.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible_collections.gpufleet.node.plugins.modules import roce_health

from tests.unit.modules import harness, rocenode
from tests.unit.modules.rocenode import ETHTOOL, RoceNode

ENV = {"environ_update": {"LC_ALL": "C"}}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RoceNode:
    node = rocenode.install(tmp_path, monkeypatch)
    monkeypatch.setattr(roce_health, "_monotonic", node.clock)
    monkeypatch.setattr(roce_health, "_sleep", node.sleep)
    node.load(4)  # the burn-in's load, or a job's
    return node


def run_module(node: RoceNode, args: dict[str, Any] | None = None, **kwargs: Any) -> harness.Run:
    return harness.run_module(
        roce_health.main,
        args or {},
        run_command=lambda module, argv, **kw: node.run_command(argv, **kw),
        get_bin_path=ETHTOOL,
        **kwargs,
    )


def test_healthy_fabric_under_load(node: RoceNode) -> None:
    run = run_module(node, expect=harness.ExitJson)
    result = run.result
    run.which.assert_called_once_with(mock.ANY, "ethtool")
    once = [([ETHTOOL, "-S", p["netdev"]], ENV) for p in node.ports()]
    assert node.calls == once + once
    assert result["changed"] is False and result["changes"] == []
    assert result["ports"] == node.ports() and result["window_s"] == 10.0
    assert len(result["checks"]) == 8 * 8 and all(c["ok"] for c in result["checks"])
    assert result["deltas"]["mlx5_0"]["np_cnp_sent"] > 0 and result["deltas"]["mlx5_0"]["packet_seq_err"] == 0
    assert result["msg"] == "8 RoCE ports healthy over 10.0s: 64 checks passed"


def test_switch_pfc_off_fails_naming_the_retransmits(node: RoceNode) -> None:
    node.leaf("leaf02", rocenode.switch_pfc_off)
    result = run_module(node, {"window_s": 5}, expect=harness.FailJson).result
    failed = sorted(c["name"] for c in result["checks"] if not c["ok"])
    leaf02 = node.on_leaf("leaf02")
    assert failed == sorted(
        [f"fabric.retransmits[{d}]" for d in leaf02] + [f"fabric.rx_discards[{d}]" for d in leaf02]
    )
    assert result["window_s"] == 5.0
    assert result["msg"].startswith(f"RoCE ports unhealthy: {leaf02[0]} over 5s: ")
    assert result["msg"].endswith(" (and 2 more)")


def test_check_mode_reads_and_judges_the_same(node: RoceNode) -> None:
    node.leaf("leaf01", rocenode.switch_pfc_off)
    result = run_module(node, check_mode=True, expect=harness.FailJson).result
    assert len(node.calls) == 16
    assert {c["name"] for c in result["checks"] if not c["ok"]} >= {
        f"fabric.retransmits[{d}]" for d in node.on_leaf("leaf01")
    }


def test_thresholds_replace_the_defaults(node: RoceNode) -> None:
    node.leaf("leaf01", rocenode.switch_pfc_off)
    result = run_module(
        node,
        {"thresholds": {"retransmits_per_s": "100000", "rx_discards_per_s": 100000}},
        expect=harness.ExitJson,
    ).result
    retransmits = [c for c in result["checks"] if c["name"].startswith("fabric.retransmits[")]
    assert all(c["ok"] and c["limit"] == 100000.0 for c in retransmits)


def test_a_failing_ethtool_fails_the_module_naming_it(node: RoceNode) -> None:
    node.answers[(ETHTOOL, "-S", "ens38np0")] = (
        96,
        "",
        "Cannot get stats strings information: No such device\n",
    )
    result = run_module(node, expect=harness.FailJson).result
    assert result["msg"] == (
        "ethtool -S ens38np0 failed (rc=96): Cannot get stats strings information: No such device; "
        "run it by hand on this node to see why"
    )
    assert result["cmd"] == [ETHTOOL, "-S", "ens38np0"] and result["rc"] == 96
    assert result["checks"] == [] and len(node.calls) == 2


def test_without_ethtool_the_module_says_to_install_it(node: RoceNode) -> None:
    result = harness.run_module(
        roce_health.main, {}, run_command=node.run_command, get_bin_path=lambda *a, **k: None
    ).result
    assert result["failed"] is True
    assert result["msg"] == "ethtool is not installed on this node (not on PATH); install it or fix PATH"
    assert node.calls == []


def test_a_node_without_roce_ports_warns(
    node: RoceNode, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(roce_health, "roce_ports", lambda: [])
    run = run_module(node, expect=harness.ExitJson)
    assert run.result["checks"] == [] and run.result["msg"] == "no RoCE port to judge"
    assert node.calls == [] and len(run.warnings) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"window_s": 0}, "window_s is 0.0; give 0 < window_s <= 3600 seconds"),
        ({"priority": 8}, "priority is 8; the RoCE priority is 0..7 (3 in the fleet's profile)"),
        ({"thresholds": {"pause_pct": -5}}, "thresholds: pause_pct must be 0 or more, not -5"),
        (
            {"thresholds": {"drops": 1}},
            "thresholds: drops is not a threshold (known: buffer_overrun_errors, link_flap_settle_s, "
            "link_flaps, link_integrity_errors, min_traffic_share, pause_pct, ",
        ),
    ],
)
def test_bad_options_fail_before_anything_is_read(node: RoceNode, args: dict[str, Any], message: str) -> None:
    result = run_module(node, args, expect=harness.FailJson).result
    assert result["msg"].startswith(message)
    assert node.calls == []
