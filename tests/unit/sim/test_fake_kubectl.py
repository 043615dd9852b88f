"""The stand-in kubectl (sim/src/gpufleet_sim/tools/kubectl.py): cordon, uncordon and drain as the drain
role calls them, and `annotate node` parsed and answered as kubectl's annotate.go does (the drain role
keeps its reason in the node's gpufleet.io/drain-reason annotation), the annotations kept in the node's
state for a test to read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim import state
from gpufleet_sim.tools import kubectl

from tests.unit.sim.fake_node import node_state_dir, run

KEY = "gpufleet.io/drain-reason"


@pytest.fixture
def node(tmp_path: Path) -> Path:
    return node_state_dir(tmp_path, 2)


def saved(node: Path) -> dict[str, Any]:
    """The node's state as the stand-in left it."""
    return dict(state.load(node))


def test_cordon_drain_uncordon_keep_the_nodes_schedulability(node: Path) -> None:
    assert run(kubectl, node, "cordon", "b300-node02") == (0, "node/b300-node02 cordoned\n", "")
    assert run(kubectl, node, "drain", "b300-node02", "--ignore-daemonsets", "--timeout=300s") == (
        0,
        "node/b300-node02 already cordoned\nnode/b300-node02 drained\n",
        "",
    )
    assert saved(node)["k8s_unschedulable"] is True
    assert run(kubectl, node, "uncordon", "b300-node02") == (0, "node/b300-node02 uncordoned\n", "")
    assert saved(node)["k8s_unschedulable"] is False


def test_annotate_sets_overwrites_and_removes_a_key(node: Path) -> None:
    assert run(
        kubectl, node, "annotate", "node", "b300-node02", "--overwrite", f"{KEY}=gpufleet gate (x)"
    ) == (
        0,
        "node/b300-node02 annotated\n",
        "",
    )
    assert saved(node)["k8s_annotations"] == {KEY: "gpufleet gate (x)"}
    # the value keeps everything after the first '=' (a check's value may hold one)
    reason = "gpufleet gate: health.xid[0000:1b:00.0] 79 a=b"
    assert run(kubectl, node, "annotate", "--overwrite", "node/b300-node02", f"{KEY}={reason}")[0] == 0
    assert saved(node)["k8s_annotations"] == {KEY: reason}
    assert run(kubectl, node, "annotate", "node", "b300-node02", f"{KEY}-") == (
        0,
        "node/b300-node02 annotated\n",
        "",
    )
    assert saved(node)["k8s_annotations"] == {}
    # removing a key the node does not have is no error (annotate.go deletes from the map)
    assert run(kubectl, node, "annotate", "nodes", "b300-node02", f"{KEY}-") == (
        0,
        "node/b300-node02 annotated\n",
        "",
    )
    calls = [c["argv"][:1] for c in saved(node)["scheduler_calls"]]
    assert calls == [["annotate"]] * 4


def test_an_existing_key_is_refused_without_overwrite_and_kept(node: Path) -> None:
    run(kubectl, node, "annotate", "node", "b300-node02", f"{KEY}=gpufleet drift --fix")
    rc, out, err = run(kubectl, node, "annotate", "node", "b300-node02", f"{KEY}=gpufleet gate: x")
    assert (rc, out) == (1, "")
    assert err == (
        "error: --overwrite is false but found the following declared annotation(s): "
        f"'{KEY}' already has a value (gpufleet drift --fix)\n"
    )
    assert saved(node)["k8s_annotations"] == {KEY: "gpufleet drift --fix"}
    # --overwrite=false is the default spelled out
    assert run(kubectl, node, "annotate", "--overwrite=false", "node", "b300-node02", f"{KEY}=y")[0] == 1
    assert saved(node)["k8s_annotations"] == {KEY: "gpufleet drift --fix"}


@pytest.mark.parametrize(
    ("argv", "err"),
    [
        (
            ["node", f"{KEY}=x", "b300-node02"],
            "error: all resources must be specified before annotation changes: b300-node02\n",
        ),
        (["node", "b300-node02"], "error: at least one annotation update is required\n"),
        (
            [f"{KEY}=x"],
            "error: one or more resources must be specified as <resource> <name> or <resource>/<name>\n",
        ),
        (["node", f"{KEY}=x"], "error: resource(s) were provided, but no name was specified\n"),
        (
            ["node", "b300-node02", f"{KEY}=x", f"{KEY}-"],
            f"error: can not both modify and remove the following annotation(s) in the same command: {KEY}\n",
        ),
        (["pods", "b300-node02", f"{KEY}=x"], 'error: the server doesn\'t have a resource type "pods"\n'),
    ],
)
def test_a_malformed_annotate_is_refused_and_changes_nothing(node: Path, argv: list[str], err: str) -> None:
    assert run(kubectl, node, "annotate", *argv) == (1, "", err)
    assert saved(node).get("k8s_annotations", {}) == {}


def test_an_unknown_verb_is_refused(node: Path) -> None:
    assert run(kubectl, node, "label", "node", "b300-node02", "a=b") == (
        1,
        "",
        'error: unknown command "label" for "kubectl"\n',
    )
