"""Whether gpufleet left a node out of service: its record, else Slurm's state and reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state

SHOW = """NodeName=node02 Arch=x86_64 CoresPerSocket=56
   State={state} ThreadsPerCore=2
   Reason={reason} [root@2026-12-04T10:00:00]
"""


def answer(text: str, rc: int = 0) -> Callable[..., tuple[int, str, str]]:
    def run(args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert args == ["/usr/bin/scontrol", "show", "node", "node02"]
        return rc, text, "" if rc == 0 else "slurm_load_node error: Unable to contact slurm controller"

    return run


@pytest.mark.parametrize(
    ("state", "reason", "named"),
    [
        ("IDLE+DRAIN", "gpufleet drift --fix", True),
        ("MIXED+DRAINING", "gpufleet gate (post-maintenance)", True),
        ("IDLE+DRAIN", "bad DIMM, ticket 1234", False),  # someone else's drain
        ("IDLE", "gpufleet drift --fix", False),
    ],
)
def test_slurm_names_a_node_it_shows_drained_for_gpufleet(state: str, reason: str, named: bool) -> None:
    found = drain_state.from_slurm(
        answer(SHOW.format(state=state, reason=reason)), "/usr/bin/scontrol", "node02"
    )
    if not named:
        assert found is None
        return
    assert found is not None
    assert (found["name"], found["ok"], found["value"]) == ("drain.left_drained", False, f"slurm: {reason}")
    assert "no drain record" in found["message"]


def test_slurm_that_cannot_answer_is_named() -> None:
    found = drain_state.from_slurm(answer("", rc=1), "/usr/bin/scontrol", "node02")
    assert found is not None and found["value"] == "unknown" and "Unable to contact" in found["message"]
    found = drain_state.from_slurm(answer("garbage\n"), "/usr/bin/scontrol", "node02")
    assert found is not None and found["value"] == "unknown" and "no State=" in found["message"]


def test_the_record_is_named_first(tmp_path: Path) -> None:
    assert drain_state.from_record(str(tmp_path / "drained")) is None
    (tmp_path / "drained").write_text("slurm: gpufleet drift --fix\n")
    found = drain_state.from_record(str(tmp_path / "drained"))
    assert found is not None and found["value"] == "slurm: gpufleet drift --fix"
