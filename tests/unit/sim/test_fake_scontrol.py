"""Slurm's answers as the real 22.05 scontrol gives them (tests/fixtures/real/slurm/, captured by
scripts/capture_slurm.py): gpufleet's parser on the real captures first, then the fake scontrol (used
where no real Slurm runs) held to the same words, and the real cluster's helpers (sim/slurm.py) on
the real outputs and controller log."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state
from gpufleet_sim import slurm
from gpufleet_sim.tools import scontrol

from tests.unit.sim.fake_node import node_state_dir, run

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "slurm"
REASON = "gpufleet gate (post-maintenance)"


def real(name: str) -> tuple[str, str]:
    """A real call's (stdout, stderr)."""
    err = REAL / f"scontrol-{name}.stderr.txt"
    return (REAL / f"scontrol-{name}.txt").read_text(), err.read_text() if err.exists() else ""


@pytest.fixture
def node(tmp_path: Path) -> Path:
    return node_state_dir(tmp_path, 1)


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        ("show-node-idle", ("IDLE", None)),
        ("show-node-drained", ("IDLE+DRAIN", REASON)),
        ("show-node-resumed-at-once", ("IDLE+NOT_RESPONDING", None)),
    ],
)
def test_gpufleets_parser_reads_the_real_show_node(capture: str, expected: tuple[str, str | None]) -> None:
    assert drain_state.parse_slurm_node(real(capture)[0]) == expected


@pytest.mark.parametrize(
    ("capture", "reason"), [("show-node-idle-oneliner", None), ("show-node-drained-oneliner", REASON)]
)
def test_the_clusters_reader_takes_the_real_one_line_form(capture: str, reason: str | None) -> None:
    found = slurm.parse_node_line(real(capture)[0])
    assert (found["NodeName"], found.get("Reason"), found["Partitions"]) == ("node01", reason, "gpu")
    assert found["State"] == ("IDLE+DRAIN" if reason else "IDLE")


def test_the_clusters_history_reads_the_real_controller_log(tmp_path: Path) -> None:
    cluster = slurm.SlurmCluster(tmp_path)
    cluster.controller_log.parent.mkdir()
    cluster.controller_log.write_text((REAL / "slurmctld-update-node.log").read_text())
    changes = cluster.changes("node01")
    assert [(c["state"], c.get("reason")) for c in changes] == [("drain", REASON), ("resume", None)]
    assert float(str(changes[0]["time"])) <= float(str(changes[1]["time"]))
    assert cluster.changes("node99") == []  # refused: no change recorded


@pytest.mark.parametrize(
    ("capture", "argv"),
    [
        ("update-drain", ["update", "nodename=node01", "state=drain", f"reason={REASON}"]),
        ("update-resume", ["update", "nodename=node01", "state=resume"]),
        ("update-drain-without-reason", ["update", "nodename=node01", "state=drain"]),
        ("update-bad-state", ["update", "nodename=node01", "state=sideways"]),
    ],
)
def test_the_fake_answers_and_refuses_in_the_real_words(node: Path, capture: str, argv: list[str]) -> None:
    out, err = real(capture)
    rc, fake_out, fake_err = run(scontrol, node, *argv)
    assert (rc, fake_out, fake_err) == (1 if (out + err).strip() else 0, out, err)


def test_the_fakes_show_node_reads_as_the_real_one_through_a_drain_and_resume(node: Path) -> None:
    for argv, capture in [
        ([], "show-node-idle"),
        (["update", "nodename=node01", "state=drain", f"reason={REASON}"], "show-node-drained"),
        (["update", "nodename=node01", "state=resume"], "show-node-idle"),
    ]:
        if argv:
            assert run(scontrol, node, *argv)[0] == 0
        rc, shown, _ = run(scontrol, node, "show", "node", "node01")
        assert rc == 0
        assert drain_state.parse_slurm_node(shown) == drain_state.parse_slurm_node(real(capture)[0])
        # every key the fake prints is one the real one prints
        keys = {w.split("=")[0] for w in shown.split() if "=" in w}
        assert keys <= {w.split("=")[0] for w in real(capture)[0].split() if "=" in w}


def test_a_reason_alone_renames_a_drain_and_keeps_its_state(node: Path) -> None:
    """The gate names the failed checks of a node it drained with `update nodename=X reason=...` alone."""
    assert run(scontrol, node, "update", "nodename=node01", "state=drain", f"reason={REASON}")[0] == 0
    named = "gpufleet gate: health.xid[0000:1b:00.0] 79"
    assert run(scontrol, node, "update", "nodename=node01", f"reason={named}") == (0, "", "")
    shown = run(scontrol, node, "show", "node", "node01")[1]
    assert drain_state.parse_slurm_node(shown) == ("IDLE+DRAIN", named)
