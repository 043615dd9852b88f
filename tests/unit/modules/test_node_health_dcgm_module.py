"""gpufleet.node.node_health with DCGM's diagnostic, on a simulated b300-16 node: nvidia-smi and dcgmi are
the simulator's (their real formats), under coreutils' timeout as the module runs them. The simulator's
dcgm-diag-fail is found by level 2's GPU Memory test and blocks the node naming GPU 2; dcgmi missing with
a level set fails closed naming it; check mode and level 0 do not run it."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.modules import node_health
from gpufleet_sim import faults
from gpufleet_sim.tools import dcgmi

from tests.unit.modules import harness
from tests.unit.modules.simnode import SMI, SimNode

DCGMI = "/usr/bin/dcgmi"
TIMEOUT = "/usr/bin/timeout"


class DcgmNode(SimNode):
    """A SimNode that also answers ``timeout -k 10 <s> dcgmi diag ...`` with the simulator's dcgmi."""

    def __call__(self, module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        argv = list(args)
        if argv[0] != TIMEOUT:
            return super().__call__(module, argv, **kwargs)
        self.calls.append(argv)
        assert argv[1:3] == ["-k", "10"] and argv[4] == DCGMI, argv
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = dcgmi.main(argv[5:], self.dir)
        return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dcgmi, "pause", lambda seconds: None)


@pytest.fixture
def node(tmp_path: Path) -> DcgmNode:
    return DcgmNode(tmp_path / "node")


def run(
    node: DcgmNode, args: dict[str, Any], tools: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    found = {"nvidia-smi": SMI, "dcgmi": DCGMI, "timeout": TIMEOUT} if tools is None else tools
    base = {"expected_gpu_count": 16, "kernel_log": False}
    return harness.run_module(
        node_health.main,
        {**base, **args},
        run_command=node,
        get_bin_path=lambda module, name, *a, **k: found.get(name),
        **kw,
    ).result


def diag_checks(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"] if c["name"].startswith("health.dcgm_diag")}


def test_a_healthy_node_passes_every_test_of_level_2(node: DcgmNode) -> None:
    result = run(node, {"dcgm_diag_level": 2}, expect=harness.ExitJson)
    checks = diag_checks(result)
    assert len(checks) == 11 and all(c["ok"] for c in checks.values())
    assert checks["health.dcgm_diag[GPU Memory]"]["message"].endswith("passed on 16 GPUs")
    assert result["dcgm_diag"]["version"] == "3.3.9" and result["dcgm_diag"]["rc"] == 0
    assert [TIMEOUT, "-k", "10", "1800", DCGMI, "diag", "-r", "2", "-j"] in node.calls


def test_dcgm_diag_fail_blocks_the_node_naming_gpu_2_and_level_1_does_not_see_it(node: DcgmNode) -> None:
    faults.inject(node.dir, "dcgm-diag-fail")
    uuid = node.state()["gpus"][2]["uuid"]
    level1 = run(node, {"dcgm_diag_level": 1}, expect=harness.ExitJson)
    assert diag_checks(level1) and all(c["ok"] for c in diag_checks(level1).values())
    result = run(node, {"dcgm_diag_level": 2}, expect=harness.FailJson)
    failed = [c for c in result["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["health.dcgm_diag[GPU Memory]"]
    memory = failed[0]
    assert (memory["value"], memory["limit"]) == ("Fail", "Pass")
    assert f"failed on GPU 2 ({uuid}, " in memory["message"]
    assert "Found 1024 faulty memory elements on GPU 2" in memory["message"]
    assert "it must not serve" in memory["message"]
    assert result["msg"].startswith("node health: 1 of ") and "faulty memory elements" in result["msg"]
    assert result["dcgm_diag"]["rc"] == dcgmi.RC_FAILED


def test_dcgmi_missing_with_a_level_set_fails_closed_before_any_reading(
    node: DcgmNode, tmp_path: Path
) -> None:
    result = run(node, {"dcgm_diag_level": 1}, tools={"nvidia-smi": SMI}, expect=harness.FailJson)
    assert result["msg"].startswith("dcgmi is not installed (not on PATH) on this node")
    assert "thermal_gate_dcgm_diag_level is 1" in result["msg"] and "fail closed" in result["msg"]
    assert node.calls == []
    wrong = run(node, {"dcgm_diag_level": 2, "dcgmi_path": str(tmp_path / "dcgmi")}, expect=harness.FailJson)
    assert f"dcgmi is not an executable file at {tmp_path / 'dcgmi'}" in wrong["msg"]


def test_level_0_and_check_mode_do_not_run_it(node: DcgmNode) -> None:
    off = run(node, {}, tools={"nvidia-smi": SMI}, expect=harness.ExitJson)
    assert off["dcgm_diag"] is None and not diag_checks(off)
    checked = run(node, {"dcgm_diag_level": 3}, check_mode=True, expect=harness.ExitJson)
    assert checked["dcgm_diag"] is None and not any(call[0] == TIMEOUT for call in node.calls)


def test_bad_levels_are_refused_naming_the_setting(node: DcgmNode) -> None:
    result = run(node, {"dcgm_diag_level": 5, "dcgm_diag_timeout_s": 10}, expect=harness.FailJson)
    assert result["input_error"] is True and node.calls == []
    assert "thermal_gate_dcgm_diag_level) must be 0 (off) or a DCGM level 1..4, got 5" in result["msg"]
    assert "thermal_gate_dcgm_diag_timeout_s) must be 60..86400 seconds" in result["msg"]


def test_a_diagnostic_that_cannot_be_read_fails_closed_with_the_other_checks_judged(node: DcgmNode) -> None:
    def broken(module: Any, args: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if args[0] == TIMEOUT:
            return 255, "", "Error: unable to establish a connection to the specified host: localhost"
        return node(module, args, **kwargs)

    result = harness.run_module(
        node_health.main,
        {"expected_gpu_count": 16, "kernel_log": False, "dcgm_diag_level": 1},
        run_command=broken,
        get_bin_path=lambda module, name, *a, **k: {"nvidia-smi": SMI, "dcgmi": DCGMI, "timeout": TIMEOUT}[
            name
        ],
        expect=harness.FailJson,
    ).result
    assert result["msg"].startswith("dcgmi diag -r 1 -j failed (rc=255): Error: unable to establish")
    assert "fail closed" in result["msg"]
    assert result["checks"] and all(c["ok"] for c in result["checks"])  # the rest was read and judged
