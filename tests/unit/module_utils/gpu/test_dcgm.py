"""dcgm: `dcgmi diag -j` on the two real captures found (tests/fixtures/real/dcgm, INDEX.md §11).

DCGM's own test of "real output" (DCGM 3.1, 8 GPUs, all passing) and a GB10 DGX Spark's level 2 run
(DCGM 4.5.2, one GPU, its software test failing on persistence mode). DCGM 3's failing cases below are
the first capture with one result changed, each change named in the test."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import dcgm

from tests.unit.mutations import read_capture

REAL = "dcgm/dcgm-jsonresulttests-real-output-3.1.0-8gpu.json"
GB10 = "dcgm/glimmer-gb10-dcgm-4.5.2-diag-r2-j-persistence-fail.json"


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


def test_real_dcgm_4_level_2_on_a_gb10_with_its_software_test_failing() -> None:
    text = read_capture(GB10)
    assert '"DCGM Diagnostic" : \n' in text and "\t\t\t\t" in text  # jsoncpp's styled writer, as printed
    result = dcgm.parse_diag_json(text)
    assert (result["version"], result["driver_version"]) == ("4.5.2", "580.82.09")
    assert [(t["category"], t["name"]) for t in result["tests"]] == [
        ("Deployment", "software"),
        ("Hardware", "memory"),
        ("Integration", "pcie"),
    ]
    persistence = (
        "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "
        '"nvidia-smi -i <gpuId> -pm 1 " as root.'
    )
    assert result["failed"] == [{"test": "software", "gpu_ids": [0], "messages": [persistence]}]
    memory, pcie = result["tests"][1]["results"], result["tests"][2]["results"]
    assert memory == [
        {"gpu_ids": [0], "status": "Pass", "warnings": [], "info": ["Allocated 112427837082 bytes (87.5%)"]}
    ]
    assert pcie[0]["status"] == "Pass" and len(pcie[0]["info"]) == 6
    assert pcie[0]["info"][0] == "GPU to Host bandwidth:\t\t58.62 GB/s"
    assert result["gpus"] == [{"gpu": 0, "status": "Fail"}]
    assert (result["passed"], result["warned"], result["runtime_error"]) == (False, False, None)


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
