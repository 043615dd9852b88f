"""dcgm: `dcgmi diag -j` on the one real capture found (tests/fixtures/real/dcgm, INDEX.md).

Only one real `dcgmi diag -j` output is public as a repository file (DCGM's own test of "real
output", DCGM 3.1, 8 GPUs, all passing); the failing cases below are that capture with one result
changed, each change named in the test."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils import dcgm

from tests.unit.mutations import read_capture

REAL = "dcgm/dcgm-jsonresulttests-real-output-3.1.0-8gpu.json"


def test_real_dcgm_3_output_with_its_warning_line_and_nulls() -> None:
    text = read_capture(REAL)
    assert text.lstrip().startswith("WARNING: THIS SHOULD NOT HAPPEN") and "null," in text
    result = dcgm.parse_diag_json(text)
    assert (result["version"], result["passed"], result["warned"], result["failed"]) == (
        "3.1.0",
        True,
        False,
        [],
    )
    names = [test["name"] for test in result["tests"]]
    assert names[0] == "Denylist" and names[-1] == "software" and len(names) == 10
    assert result["tests"][0]["results"] == [
        {"gpu_ids": list(range(8)), "status": "Pass", "warnings": [], "info": []}
    ]
    assert [row["gpu_ids"] for row in result["tests"][-1]["results"]] == [[gpu] for gpu in range(8)]
    assert result["gpus"] == [{"gpu": gpu, "status": "Pass"} for gpu in range(8)]


def _software_gpu3(text: str, replacement: str) -> str:
    old = '"gpu_ids" : 3,\n\t\t\t\t\t\t\t\t"status" : "PASS"'
    assert old in text
    return text.replace(old, '"gpu_ids" : 3,\n\t\t\t\t\t\t\t\t' + replacement)


def test_one_gpu_failing_is_named_with_its_message() -> None:
    text = _software_gpu3(
        read_capture(REAL), '"status" : "FAIL", "warnings" : ["Persistence mode for GPU 3 is disabled."]'
    )
    result = dcgm.parse_diag_json(text)
    assert result["passed"] is False
    assert result["failed"] == [
        {"test": "software", "gpu_ids": [3], "messages": ["Persistence mode for GPU 3 is disabled."]}
    ]
    assert result["gpus"][3] == {"gpu": 3, "status": "Fail"}


def test_dcgm_4_shape_entity_ids_and_warning_objects() -> None:
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": [
                                {"entity_group": "GPU", "entity_id": 0, "status": "Pass"},
                                {
                                    "entity_group": "GPU",
                                    "entity_id": 1,
                                    "status": "Warn",
                                    "warnings": [{"warning": "Row remap pending", "error_id": 81}],
                                },
                            ],
                        }
                    ],
                }
            ],
            "version": "4.2.3",
        }
    }
    result = dcgm.parse_diag_json("Successfully ran diagnostic for group.\n" + json.dumps(document))
    assert (result["passed"], result["warned"], result["version"]) == (True, True, "4.2.3")
    assert result["tests"][0]["results"][1]["warnings"] == ["Row remap pending"]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: _software_gpu3(t, '"status" : "MAYBE"'), "not PASS/FAIL/WARN/SKIP"),
        (lambda t: t.replace('"gpu_ids" : 3,', '"gpu_ids" : "3;4",'), "comma list"),
        (lambda t: t.replace('"gpu_ids" : 3,', '"gpu_ids" : -3,'), "GPU id"),
        (lambda t: t[: t.rindex("}")], "not JSON"),
        (lambda t: t + "trailing", "text after"),
        (lambda t: t.replace("DCGM GPU Diagnostic", "DCGM GPU Diagnostics"), "neither"),
        (lambda t: "Error: unable to connect to host engine\n", "no JSON object"),
    ],
)
def test_damaged_output_is_refused(damage: object, why: str) -> None:
    with pytest.raises(dcgm.ParseError, match=r"^dcgmi diag -j: .*" + why):
        dcgm.parse_diag_json(damage(read_capture(REAL)))  # type: ignore[operator]
