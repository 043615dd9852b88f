"""gpufleet.node.nccl_allreduce and its judge (module_utils/nccl/nccl_bandwidth.py) on real all_reduce_perf
captures (Azure ND H200 v5: 8 GPUs at 477 GB/s; two 8 x H100 nodes at 71 GB/s), the binary a script
that prints them, run for real under coreutils' timeout."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import nccl_bandwidth, nccl_tests
from ansible_collections.gpufleet.node.plugins.modules import nccl_allreduce

from tests.unit.modules import harness
from tests.unit.mutations import read_capture

H200_8 = "nccl-tests/azure-nd-h200-v5-8gpu-all-reduce-8g.txt"


def by_name(checks: list[dict]) -> dict[str, dict]:
    return {c["name"]: c for c in checks}


def test_the_real_h200_run_passes_a_floor_below_it_and_fails_one_above() -> None:
    run = nccl_tests.parse_all_reduce(read_capture(H200_8))
    passed = by_name(nccl_bandwidth.judge(run, 8, 400.0))
    assert passed["health.nccl_busbw"]["ok"] is True and passed["health.nccl_busbw"]["value"] == 476.967
    assert passed["health.nccl_gpus"]["value"] == 8 and passed["health.nccl_correct"]["ok"] is True
    low = by_name(nccl_bandwidth.judge(run, 8, 600.0))["health.nccl_busbw"]
    assert (low["ok"], low["value"], low["limit"], low["unit"]) == (False, 476.967, 600.0, "GB/s")
    assert "fabric.switch_ecn" in low["message"] and "health.nvlink" in low["message"]


def test_fewer_gpus_than_asked_and_wrong_elements_fail() -> None:
    run = nccl_tests.parse_all_reduce(read_capture(H200_8))
    assert by_name(nccl_bandwidth.judge(run, 16, 400.0))["health.nccl_gpus"]["ok"] is False
    corrupted = nccl_tests.parse_all_reduce(read_capture(H200_8).replace("476.96      0", "476.96      3", 1))
    correct = by_name(nccl_bandwidth.judge(corrupted, 8, 400.0))["health.nccl_correct"]
    assert correct["ok"] is False and correct["value"] == 1 and "corrupted data" in correct["message"]


def _binary(tmp_path: Path, capture: str | None, rc: int = 0, sleep: int = 0) -> Path:
    """A stand-in all_reduce_perf: prints a real capture (or nothing), after ``sleep`` s, exits ``rc``."""
    out = tmp_path / "capture.txt"
    out.write_text(read_capture(capture) if capture else "", encoding="utf-8")
    script = tmp_path / "all_reduce_perf"
    script.write_text(f"#!/bin/sh\nsleep {sleep}\ncat {out}\nexit {rc}\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def run(args: dict, expect: type[Exception] = harness.ExitJson) -> dict:
    return harness.run_module(
        nccl_allreduce.main, args, get_bin_path=shutil.which("timeout"), expect=expect
    ).result


def test_the_module_runs_the_binary_and_judges_its_report(tmp_path: Path) -> None:
    binary = _binary(tmp_path, H200_8)
    result = run({"binary": str(binary), "gpus": 8, "min_busbw_gbps": 400})
    assert result["changed"] is False and result["all_reduce"]["avg_busbw_gbps"] == 476.967
    assert "average bus bandwidth 476.967 GB/s, floor 400 GB/s" in result["msg"]
    failed = run({"binary": str(binary), "gpus": 8, "min_busbw_gbps": 500}, expect=harness.FailJson)
    assert by_name(failed["checks"])["health.nccl_busbw"]["ok"] is False


@pytest.mark.parametrize(
    ("capture", "rc", "sleep", "timeout_s", "message"),
    [
        (None, 0, 0, 10, "all_reduce_perf: empty output"),
        (H200_8, 3, 0, 10, "all_reduce_perf failed (rc=3)"),
        (H200_8, 0, 30, 10, "all_reduce_perf did not finish in 10 s: a collective hung"),
    ],
)
def test_a_failed_run_fails_closed_naming_it(
    tmp_path: Path, capture: str | None, rc: int, sleep: int, timeout_s: int, message: str
) -> None:
    binary = _binary(tmp_path, capture, rc, sleep)
    args = {"binary": str(binary), "gpus": 8, "min_busbw_gbps": 400, "timeout_s": timeout_s}
    assert message in run(args, expect=harness.FailJson)["msg"]


def test_bad_input_is_refused_naming_the_setting(tmp_path: Path) -> None:
    result = run(
        {"binary": str(tmp_path / "none"), "gpus": 0, "min_busbw_gbps": 0, "min_bytes": "lots"},
        expect=harness.FailJson,
    )
    assert result["input_error"] is True
    for named in (
        "thermal_gate_nccl_gpus",
        "thermal_gate_nccl_min_busbw_gbps",
        "thermal_gate_nccl_min_bytes",
    ):
        assert named in result["msg"]
    missing = run(
        {"binary": str(tmp_path / "none"), "gpus": 8, "min_busbw_gbps": 400}, expect=harness.FailJson
    )
    assert "is not an executable all_reduce_perf" in missing["msg"]


@pytest.mark.parametrize("floor", [float("inf"), float("nan"), 10001.0, -1.0])
def test_a_floor_no_node_can_meet_or_none_can_miss_is_refused_naming_the_range(
    tmp_path: Path, floor: float
) -> None:
    """An infinite floor (.inf in YAML) blocked every node; it is bad input, named with its range."""
    result = run(
        {"binary": str(tmp_path / "none"), "gpus": 8, "min_busbw_gbps": floor}, expect=harness.FailJson
    )
    assert result["input_error"] is True
    assert "thermal_gate_nccl_min_busbw_gbps) must be above 0 and at most 10000 GB/s" in result["msg"]
