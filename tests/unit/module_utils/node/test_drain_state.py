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


@pytest.mark.parametrize(
    ("reason", "ours"),
    [
        ("gpufleet drift --fix", True),
        ("gpufleet gate (post-maintenance)", True),
        ("gpufleet gate: health.xid[0000:1b:00.0] 79", True),
        ("GPUfleet: anything", True),
        # a person's drain that quotes gpufleet's reason (an RMA opened for what the gate found)
        ("RMA 1234: gpufleet gate: health.xid[0000:1b:00.0] 79", False),
        ("bad DIMM, see the gpufleet report", False),
        ("gpufleetish", False),
        ("", False),
        (None, False),
    ],
)
def test_only_a_reason_that_starts_with_gpufleet_is_gpufleets(reason: str | None, ours: bool) -> None:
    assert drain_state.is_ours(reason) is ours


def test_a_person_who_redrained_a_node_quoting_gpufleets_reason_keeps_it() -> None:
    """drift --fix returns a node drain.left_drained names: a person's drain must never be one."""
    shown = SHOW.format(state="IDLE+DRAIN", reason="RMA 1234: gpufleet gate: health.xid[0000:1b:00.0] 79")
    assert drain_state.from_slurm(answer(shown), "/usr/bin/scontrol", "node02") is None


def failed(name: str, value: Any, unit: str = "") -> dict[str, Any]:
    return {"name": name, "ok": False, "value": value, "limit": 0, "unit": unit, "message": "m"}


XID = failed("health.xid[0000:1b:00.0]", 79)
UUID = "GPU-5a1e0c3f-7b2d-4c8e-9f10-2a3b4c5d6e7f"


def test_a_reason_names_the_failed_check_and_its_value() -> None:
    passed = dict(failed("health.gpu_count", 16), ok=True)
    reason = drain_state.drain_reason("gate", [passed, XID])
    assert reason == "gpufleet gate: health.xid[0000:1b:00.0] 79"
    # what gpufleet writes it recognises as its own, and Slurm's [user@time] suffix reads back off it
    assert drain_state.is_ours(reason)
    shown = SHOW.format(state="IDLE+DRAIN", reason=reason)
    assert drain_state.parse_slurm_node(shown) == ("IDLE+DRAIN", reason)
    found = drain_state.from_slurm(answer(shown), "/usr/bin/scontrol", "node02")
    assert found is not None and found["value"] == "slurm: " + reason


def test_values_are_shown_plainly_with_their_unit() -> None:
    checks = [
        failed(f"thermal.gpu_temp_c[{UUID}]", 91.5, "C"),
        failed("coolant.flow_lpm[loop1]", 4.0, "L/min"),
        failed("health.nvlink[GPU-1]", None, "links active"),
    ]
    assert drain_state.drain_reason("gate", checks, length=200) == (
        f"gpufleet gate: thermal.gpu_temp_c[{UUID}] 91.5 C; coolant.flow_lpm[loop1] 4 L/min; "
        "health.nvlink[GPU-1] not read"
    )


def test_checks_that_do_not_fit_are_counted() -> None:
    # a GPU's UUID is long: one of them and the count fit
    checks = [failed(f"thermal.gpu_temp_c[GPU-{i:02d}-{UUID[8:]}]", 90 + i, "C") for i in range(6)]
    reason = drain_state.drain_reason("gate", checks)
    assert reason == f"gpufleet gate: thermal.gpu_temp_c[GPU-00-{UUID[8:]}] 90 C +5 more"
    # PCI addresses are short: as many as fit, then the count
    checks = [failed(f"health.xid[0000:{i:02x}:00.0]", 79) for i in range(9)]
    reason = drain_state.drain_reason("gate", checks)
    assert len(reason) <= drain_state.MAX_REASON == 128
    assert reason.startswith("gpufleet gate: health.xid[0000:00:00.0] 79; health.xid[0000:01:00.0] 79; ")
    shown = reason.count("health.xid[")
    assert shown == 3 and reason.endswith(" +6 more"), reason
    # one check more would not have fitted beside the count
    longer = reason[: -len(" +6 more")] + "; health.xid[0000:03:00.0] 79 +5 more"
    assert len(longer) > 128


def test_a_check_failed_at_idle_and_under_load_is_named_once() -> None:
    hot = failed(f"thermal.gpu_temp_c[{UUID}]", 70, "C")
    assert drain_state.drain_reason("gate", [hot, dict(hot, value=88)]) == (
        f"gpufleet gate: thermal.gpu_temp_c[{UUID}] 70 C"
    )


def test_a_first_check_too_long_alone_is_cut_and_the_rest_counted() -> None:
    long_name = "fabric.neighbor[" + "x" * 200 + "]"
    reason = drain_state.drain_reason("gate", [failed(long_name, "swapped"), XID])
    assert len(reason) == 128 and reason.startswith("gpufleet gate: fabric.neighbor[xxx")
    assert reason.endswith("... +1 more"), reason


def test_a_reason_is_one_line_slurm_keeps_whole() -> None:
    """No newline or tab, no '"' at either end (scontrol drops it), no ' [' (read back as Slurm's own
    [user@time]), printable ASCII only (so 128 characters are 128 bytes of slurmdbd's 255)."""
    value = 'line one\n\tline "two" [x] \u00b0C \x00'
    reason = drain_state.drain_reason("gate", [failed("health.x[0]", value)], length=200)
    assert reason == "gpufleet gate: health.x[0] line one line 'two' (x] ?C ?"
    assert all(" " <= c <= "~" for c in reason)
    # a message ending in a quote
    assert drain_state.drain_reason("gate", [], 'stopped at "x"').endswith("'x'")


def test_without_a_failed_check_the_fallback_is_the_reason_cut_to_fit() -> None:
    assert drain_state.drain_reason("gate", [dict(XID, ok=True)], "Start the instances: timed out") == (
        "gpufleet gate: Start the instances: timed out"
    )
    assert drain_state.drain_reason("gate", None, "") == "gpufleet gate: blocked"
    reason = drain_state.drain_reason("gate", [], "x" * 300)
    assert len(reason) == 128 and reason.endswith("...") and drain_state.is_ours(reason)
