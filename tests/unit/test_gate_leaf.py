"""The gate's report judges a leaf switch it only read as drift does: one judge, so a leaf whose
RoCE profile drifted is never `ok` in the gate while drift calls it drifted."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet import catalog, commands, drift
from gpufleet.runner import HostResult

READ_PLAY = f"{catalog.LEAF_READ_PLAY} (its side of every RoCE link)"
CHANGE = {"setting": "qos/congestion-control/traffic-class/3/ecn", "from": "disable", "to": "enable"}


def _leaf(outcome: str, **res: Any) -> HostResult:
    task = {"task": "Read the leaf switch", "play": READ_PLAY, "outcome": outcome, "changed": False, **res}
    return HostResult.from_tasks("leaf01", [task])


LEAVES = {
    "drifted": _leaf("ok", changes=[CHANGE], checks=[]),
    "ok": _leaf("ok", changes=[], checks=[]),
    "failed": _leaf("failed", msg="NVUE answered 401"),
    "unreachable": _leaf("unreachable", msg="no route to host"),
}


@pytest.mark.parametrize("status", sorted(LEAVES))
def test_the_gate_gives_a_leaf_drifts_status(status: str) -> None:
    leaf = LEAVES[status]
    assert leaf.only_read_leaf()
    gated = commands.gate_host(leaf)
    assert gated.status == drift.drift_host(leaf).status == status
    assert gated.changes == leaf.changes


def test_a_node_is_still_judged_by_the_gate() -> None:
    """The same changes on a node the gate ran on: the node passed (its re-assertion changed it)."""
    node = HostResult.from_tasks(
        "node01", [{"task": "Apply", "play": "Post-maintenance gate", "outcome": "ok", "changes": [CHANGE]}]
    )
    assert not node.only_read_leaf()
    assert commands.gate_host(node).status == "ok"
    assert drift.drift_host(node).status == "drifted"
