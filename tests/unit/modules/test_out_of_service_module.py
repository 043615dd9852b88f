"""gpufleet.node.out_of_service: guardian.already_out on gpufleet's drain record, on Slurm drained for a
person's reason (scontrol show node as the stand-in and the real slurmctld print it), never on gpufleet's own
Slurm reason alone or a node in service; an answer that is not scontrol's fails the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import out_of_service

from tests.unit.modules import harness

SLURM = (
    "NodeName=node07 Arch=x86_64 CoresPerSocket=56\n"
    "   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   Reason={reason} [root@2026-12-06T20:11:00]\n"
)


def run(tmp_path: Path, scheduler: str = "", expect: Any = harness.ExitJson) -> dict[str, Any]:
    args = {"record_path": str(tmp_path / "drained"), "scheduler": scheduler, "node_name": "node07"}
    result: dict[str, Any] = harness.run_module(out_of_service.main, args, expect=expect).result
    return result


def test_a_node_in_service_passes(tmp_path: Path) -> None:
    result = run(tmp_path, SLURM.format(state="MIXED", reason="none"))
    assert [(c["name"], c["ok"]) for c in result["checks"]] == [("guardian.already_out", True)]
    assert result["record"] is None and result["changed"] is False


def test_gpufleets_drain_record_fails_the_node(tmp_path: Path) -> None:
    (tmp_path / "drained").write_text("slurm: gpufleet gate: health.xid[0000:1b:00.0] 79\n")
    result = run(tmp_path, expect=harness.FailJson)
    [check] = result["checks"]
    assert (check["name"], check["ok"]) == ("guardian.already_out", False)
    assert check["value"] == "drain record: slurm: gpufleet gate: health.xid[0000:1b:00.0] 79"
    assert result["msg"].startswith("gpufleet already took this node out of service")


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "DRAINED", "MIXED+DRAIN"])
def test_a_persons_drain_fails_the_node(tmp_path: Path, state: str) -> None:
    result = run(tmp_path, SLURM.format(state=state, reason="RMA 4711 fan"), expect=harness.FailJson)
    assert result["checks"][0]["value"] == "slurm: RMA 4711 fan"
    assert result["scheduler"] == {"state": state, "reason": "RMA 4711 fan"}
    assert "a person took it out of service on purpose" in result["msg"]


def test_gpufleets_own_slurm_reason_without_a_record_is_not_a_persons(tmp_path: Path) -> None:
    result = run(
        tmp_path, SLURM.format(state="IDLE+DRAIN", reason="gpufleet watch: health.xid[0000:1b:00.0] 79")
    )
    assert result["checks"][0]["ok"] is True


def test_an_answer_that_is_not_scontrols_fails(tmp_path: Path) -> None:
    result = run(tmp_path, "slurm_load_node error: Invalid node name specified\n", expect=harness.FailJson)
    assert (
        result["msg"] == "scontrol show node node07: no State= in scontrol's answer"
        and result["checks"] == []
    )
