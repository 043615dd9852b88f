"""node_health's judgement of DCGM's diagnostic (health.dcgm_diag[<test>]) on the two real `dcgmi diag -j`
captures (DCGM 3.1 on 8 GPUs, all passing; DCGM 4.5.2 on a GB10, its software test failing), and how a
run is read: exit 226 with its JSON is a reading, a hang, an error without JSON or an unreadable output
fails closed naming the tool."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import dcgm
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health

from tests.unit.mutations import read_capture

DCGM3 = "dcgm/dcgm-jsonresulttests-real-output-3.1.0-8gpu.json"
GB10 = "dcgm/glimmer-gb10-dcgm-4.5.2-diag-r2-j-persistence-fail.json"


def gpus(count: int) -> list[dict[str, Any]]:
    """What -q -x gives the judge: index, UUID, bus id (only these name a GPU)."""
    return [
        {"index": i, "uuid": f"GPU-{i:08d}-0000", "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0"}
        for i in range(count)
    ]


def diag(capture: str, level: int, rc: int = 0, **edits: str) -> dict[str, Any]:
    """A capture parsed, each edit made at the first place its text occurs."""
    text = read_capture(capture)
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return dict(dcgm.parse_diag_json(text), level=level, rc=rc)


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def test_the_real_dcgm_3_run_passes_every_test_by_name() -> None:
    checks = by_name(node_health.diag_checks(diag(DCGM3, 1), gpus(8)))
    assert len(checks) == 10 and all(c["ok"] for c in checks.values())
    software = checks["health.dcgm_diag[software]"]
    assert (software["value"], software["limit"]) == ("Pass", "Pass")
    assert software["message"] == "DCGM diagnostic (level 1) test software passed on 8 GPUs"
    assert "health.dcgm_diag[Denylist]" in checks and "health.dcgm_diag" not in checks


def test_the_real_gb10_failure_is_named_with_its_gpu_message_and_what_to_do() -> None:
    checks = by_name(node_health.diag_checks(diag(GB10, 2, rc=226), gpus(1)))
    assert set(checks) == {"health.dcgm_diag[software]", "health.dcgm_diag[memory]", "health.dcgm_diag[pcie]"}
    software = checks["health.dcgm_diag[software]"]
    assert (software["ok"], software["value"], software["limit"]) == (False, "Fail", "Pass")
    message = software["message"]
    assert message.startswith(
        "DCGM diagnostic (level 2) test software failed on GPU 0 (GPU-00000000-0000, 00000000:18:00.0): "
        "Persistence Mode: Persistence mode for GPU 0 is disabled."
    )
    assert "not the GPU itself" in message and "gate the node again" in message
    assert checks["health.dcgm_diag[memory]"]["ok"] is True and checks["health.dcgm_diag[pcie]"]["ok"] is True
    # the judge blocks on it with the other health checks (one judge)
    readings = {"gpus": gpus(1), "links": None, "xids": None, "diag": diag(GB10, 2, rc=226)}
    failed = [c["name"] for c in node_health.judge(readings) if not c["ok"]]
    assert failed == ["health.dcgm_diag[software]"]


def test_a_warning_is_reported_and_does_not_block() -> None:
    # the GB10's memory result (its first "Pass") turned into a warning
    edit = '"status" : "Warn", "warnings" : ["Found 12 correctable memory errors on GPU 0"]'
    warned = diag(GB10, 2, **{'"status" : "Pass"': edit})
    memory = by_name(node_health.diag_checks(warned, gpus(1)))["health.dcgm_diag[memory]"]
    assert (memory["ok"], memory["value"]) == (True, "Warn")
    assert "Found 12 correctable memory errors on GPU 0" in memory["message"]
    assert memory["message"].endswith("(a warning: it does not block)")


def test_a_failure_on_one_gpu_of_eight_names_only_it_and_one_on_all_says_every_gpu() -> None:
    one = diag(
        DCGM3,
        1,
        rc=226,
        **{
            '"gpu_ids" : 3,\n\t\t\t\t\t\t\t\t"status" : "PASS"': (
                '"gpu_ids" : 3,\n\t\t\t\t\t\t\t\t"status" : "FAIL", "warnings" : '
                '[{"warning" : "Persistence mode for GPU 3 is disabled.", "error_id" : 29}]'
            )
        },
    )
    software = by_name(node_health.diag_checks(one, gpus(8)))["health.dcgm_diag[software]"]
    assert software["ok"] is False
    assert (
        "failed on GPU 3 (GPU-00000003-0000, 00000000:1B:00.0): Persistence mode for GPU 3"
        in software["message"]
    )
    assert "GPU 2 " not in software["message"] and "not the GPU itself" in software["message"]
    # the first result of the capture is Denylist's, over all eight GPUs
    every = diag(
        DCGM3, 1, rc=226, **{'"status" : "PASS"': '"status" : "FAIL", "warnings" : ["Driver is denylisted"]'}
    )
    denylist = by_name(node_health.diag_checks(every, gpus(8)))["health.dcgm_diag[Denylist]"]
    assert denylist["ok"] is False and "failed on every GPU: Driver is denylisted" in denylist["message"]


def test_dcgm_that_could_not_run_or_exits_with_an_error_it_does_not_explain_fails_closed() -> None:
    broken = dict(diag(DCGM3, 1), tests=[], failed=[], runtime_error="Unable to connect to host engine")
    could_not = by_name(node_health.diag_checks(broken, gpus(8)))["health.dcgm_diag"]
    assert (could_not["ok"], could_not["value"]) == (False, "Unable to connect to host engine")
    assert "nv-hostengine" in could_not["message"] and "fail closed" in could_not["message"]
    unexplained = by_name(node_health.diag_checks(diag(DCGM3, 1, rc=226), gpus(8)))["health.dcgm_diag"]
    assert (unexplained["ok"], unexplained["value"], unexplained["limit"]) == (False, 226, 0)
    assert "DCGM_ST_NVVS_ERROR" in unexplained["message"]


def test_the_family_can_be_turned_off_with_a_reason_and_none_is_no_check() -> None:
    readings = {"gpus": gpus(1), "links": None, "xids": None, "diag": diag(GB10, 2, rc=226)}
    off = {"health.dcgm_diag": "GB10: persistence mode is managed by the host"}
    software = by_name(node_health.judge(readings, off=off))["health.dcgm_diag[software]"]
    assert software["ok"] is True and software["message"].endswith(
        "(not judged: " + off["health.dcgm_diag"] + ")"
    )
    assert node_health.diag_checks(None, gpus(1)) == []
    assert not node_health.input_errors(
        {
            "expected_gpu_count": None,
            "max_volatile_uncorrectable_ecc": 0,
            "max_aggregate_uncorrectable_ecc": None,
            "turned_off": off,
        },
        "thermal_gate_health_",
    )


@pytest.mark.parametrize(
    ("level", "timeout_s", "named"),
    [
        (5, None, "thermal_gate_dcgm_diag_level) must be 0 (off) or a DCGM level 1..4, got 5"),
        (-1, None, "got -1"),
        (True, None, "got True"),
        (1, 30, "thermal_gate_dcgm_diag_timeout_s) must be 60..86400 seconds"),
    ],
)
def test_bad_diagnostic_inputs_are_named_with_their_range(level: Any, timeout_s: Any, named: str) -> None:
    errors = node_health.diag_input_errors(level, timeout_s)
    assert len(errors) == 1 and named in errors[0]
    assert node_health.diag_input_errors(0, None) == [] and node_health.diag_input_errors(4, 86400) == []


class Runs:
    """run_command for read_diag: what dcgmi prints and exits with; records the argv."""

    def __init__(self, rc: int, out: str, err: str = "") -> None:
        self.answer, self.argv = (rc, out, err), []  # type: ignore[var-annotated]

    def __call__(self, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        assert kwargs == {"environ_update": {"LC_ALL": "C"}}
        self.argv.append(argv)
        return self.answer


def test_a_run_exiting_226_with_its_json_is_a_reading_under_a_timeout_by_level() -> None:
    runs = Runs(226, "Successfully ran diagnostic for group.\n" + read_capture(GB10))
    found = node_health.read_diag(runs, "/usr/bin/dcgmi", 2, None, "/usr/bin/timeout")
    assert runs.argv == [["/usr/bin/timeout", "-k", "10", "1800", "/usr/bin/dcgmi", "diag", "-r", "2", "-j"]]
    assert (found["level"], found["rc"], found["version"], found["passed"]) == (2, 226, "4.5.2", False)
    node_health.read_diag(runs, "/usr/bin/dcgmi", 4, 600)
    assert runs.argv[-1][:4] == ["timeout", "-k", "10", "600"]


@pytest.mark.parametrize(
    ("rc", "out", "err", "message"),
    [
        (124, "", "", "dcgmi diag -r 1 -j did not finish in 600 s (thermal_gate_dcgm_diag_timeout_s)"),
        (
            255,
            "",
            "Error: unable to establish a connection to the specified host: localhost",
            "dcgmi diag -r 1 -j failed (rc=255): Error: unable to establish a connection",
        ),
        (0, "Successfully ran diagnostic for group.\n", "", "dcgmi diag -j: no JSON object in the output"),
        (0, read_capture(DCGM3)[:-40], "", "dcgmi diag -j: output is not JSON"),
    ],
)
def test_a_run_that_hangs_errs_or_prints_no_document_fails_closed(
    rc: int, out: str, err: str, message: str
) -> None:
    with pytest.raises(node_health.ReadError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        node_health.read_diag(Runs(rc, out, err), "/usr/bin/dcgmi", 1)
