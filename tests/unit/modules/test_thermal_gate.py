"""gpufleet.node.thermal_gate: verdicts, failing when blocked, overrides, check mode."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import parse_query_text
from ansible_collections.gpufleet.node.plugins.modules import thermal_gate

HGX_Q = "nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt"


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def _exit_json(self: Any, **kwargs: Any) -> None:
    raise ExitJson(kwargs)


def _fail_json(self: Any, **kwargs: Any) -> None:
    kwargs["failed"] = True
    raise FailJson(kwargs)


def run_module(args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    with (
        patch_module_args(args),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        mock.patch.object(basic.AnsibleModule, "warn", autospec=True) as warn,
        pytest.raises((ExitJson, FailJson)) as outcome,
    ):
        thermal_gate.main()
    return outcome.value.args[0], [c.args[1] for c in warn.call_args_list]


def coolant(flow: float) -> dict[str, Any]:
    return {
        "connectors": [
            {
                "key": f"1/Board{i}",
                "state": "Enabled",
                "health": "OK",
                "flow_lpm": flow,
                "supply_c": 25.0,
                "return_c": 27.0,
                "delta_c": 2.0,
                "leak": "OK",
            }
            for i in (0, 1)
        ],
        "cdus": [],
    }


@pytest.fixture
def cool_gpus(read_fixture: Any) -> list[dict[str, Any]]:
    """The 8xH100 capture with its power-brake flags cleared (a healthy idle HGX)."""
    gpus = parse_query_text(read_fixture(HGX_Q))["gpus"]
    for gpu in gpus:
        gpu["clocks_event_reasons"] = [r for r in gpu["clocks_event_reasons"] if "slowdown" not in r]
    return gpus


@pytest.mark.parametrize("check_mode", [False, True])
def test_pass(cool_gpus: list[dict[str, Any]], check_mode: bool) -> None:
    result, warnings = run_module(
        {"gpus": cool_gpus, "coolant": coolant(19.2), "min_flow_lpm": 14.0, "_ansible_check_mode": check_mode}
    )
    assert "failed" not in result and result["changed"] is False
    assert result["verdict"] == "pass" and result["failed_checks"] == [] and result["override"] is None
    assert len(result["checks"]) == 8 * 4 + 2 * 5
    assert result["changes"] == [] and warnings == []
    assert result["msg"] == "thermal gate pass: 42 checks"


def test_low_flow_blocks_and_names_reading_and_limit(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0})
    assert result["failed"] is True and result["verdict"] == "blocked"
    assert result["msg"].startswith(
        "thermal gate blocked 2 of 42 checks: coolant connector 1/Board0 flow 6.2 L/min, below the 14 L/min "
        "minimum; coolant connector 1/Board1 flow 6.2 L/min, below the 14 L/min minimum."
    )
    assert "override_reason" in result["msg"]
    # The checks travel with the failure, for the fleet report.
    assert [c["name"] for c in result["checks"] if not c["ok"]] == [
        "coolant.flow_lpm[1/Board0]",
        "coolant.flow_lpm[1/Board1]",
    ]


def test_hot_gpu_blocks(cool_gpus: list[dict[str, Any]]) -> None:
    cool_gpus[3]["temperature"]["gpu_c"] = 92
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2)})
    uuid = cool_gpus[3]["uuid"]
    assert result["verdict"] == "blocked"
    assert result["failed_checks"] == [f"thermal.gpu_temp_c[{uuid}]"]
    assert f"GPU {uuid} temperature 92 C, above the 60 C limit" in result["msg"]


def test_the_real_power_brake_capture_blocks(read_fixture: Any) -> None:
    gpus = parse_query_text(read_fixture(HGX_Q))["gpus"]
    result, _ = run_module({"gpus": gpus, "coolant": coolant(19.2)})
    # Every GPU of that HGX board shows HW Slowdown with HW Power Brake Slowdown.
    assert result["failed_checks"] == [f"thermal.clocks_event_reasons[{g['uuid']}]" for g in gpus]


def test_missing_coolant_blocks(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus})
    assert result["failed_checks"] == ["coolant.facts"]
    result, _ = run_module({"gpus": cool_gpus, "require_coolant": False})
    assert result["verdict"] == "pass"


def test_override_is_recorded_and_warned(cool_gpus: list[dict[str, Any]]) -> None:
    reason = "CHG-4711: loop B flow meter replaced, flow verified with a clamp-on meter"
    result, warnings = run_module(
        {"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0, "override_reason": reason}
    )
    assert "failed" not in result
    assert result["verdict"] == "overridden"
    assert result["override"] == {
        "reason": reason,
        "failed_checks": ["coolant.flow_lpm[1/Board0]", "coolant.flow_lpm[1/Board1]"],
    }
    assert warnings == [
        f"thermal gate overridden ({reason}); failed checks let pass: coolant.flow_lpm[1/Board0], "
        "coolant.flow_lpm[1/Board1]"
    ]
    assert len(result["checks"]) == 42


def test_blank_override_does_not_override(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module(
        {"gpus": cool_gpus, "coolant": coolant(6.2), "min_flow_lpm": 14.0, "override_reason": "  "}
    )
    assert result["failed"] is True and result["verdict"] == "blocked"


def test_skip_checks_turns_checks_off(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module(
        {"gpus": cool_gpus, "coolant": coolant(19.2), "skip_checks": ["memory_temp_c", "tlimit_c"]}
    )
    assert len(result["checks"]) == 8 * 2 + 2 * 5
    assert not any("memory" in c["name"] or "tlimit" in c["name"] for c in result["checks"])
    # A null limit is no way to skip a check: ansible-core refuses it.
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2), "min_tlimit_c": None})
    assert result["failed"] is True and "min_tlimit_c" in result["msg"]


def test_unknown_reason_is_refused(cool_gpus: list[dict[str, Any]]) -> None:
    result, _ = run_module({"gpus": cool_gpus, "coolant": coolant(19.2), "forbidden_reasons": ["too_hot"]})
    assert result["failed"] is True
    assert "forbidden_reasons" in result["msg"] and "too_hot" in result["msg"]


def test_many_failures_are_summarised() -> None:
    gpus = [
        {
            "uuid": f"GPU-{i}",
            "index": i,
            "temperature": {"gpu_c": 95, "memory_c": 40, "tlimit_c": 40},
            "clocks_event_reasons": [],
        }
        for i in range(16)
    ]
    result, _ = run_module({"gpus": gpus, "coolant": coolant(19.2)})
    assert "blocked 16 of 74 checks" in result["msg"]
    assert result["msg"].count("above the 60 C limit") == 8
    assert "(and 8 more)" in result["msg"]
