"""gpufleet.node.thermal_gate with slowdown_margin_c (issue 38 item 5): one nvidia-smi -q -d TEMPERATURE
read beside the CSV sample, each GPU's limit its own slowdown temperature less the margin, the message
naming both; without the margin nothing more is read."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import parse_query_text
from ansible_collections.gpufleet.node.plugins.modules import thermal_gate

from tests.unit.modules import harness
from tests.unit.modules.test_thermal_gate import HGX_Q, QUERY, SMI, coolant, sample_csv

TEMPERATURE = [SMI, "-q", "-d", "TEMPERATURE"]


def run_module(
    args: dict[str, Any], gpus: list[dict[str, Any]], q_text: str
) -> tuple[dict[str, Any], list[Any]]:
    calls: list[list[str]] = []

    def run_command(self: Any, argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        calls.append(argv)
        return (0, q_text, "") if argv == TEMPERATURE else (0, sample_csv(gpus), "")

    run = harness.run_module(thermal_gate.main, args, run_command=run_command, get_bin_path=SMI)
    return run.result, calls


def test_the_limit_is_each_gpus_slowdown_temperature_less_the_margin(read_fixture: Any) -> None:
    text = read_fixture(HGX_Q)
    gpus = parse_query_text(text)["gpus"]
    for gpu in gpus:
        gpu["clocks_event_reasons"] = []
    # the capture's first GPU: 29 C, slowdown 29 + 56 + 2 = 87 C; a 60 C margin puts its limit at 27 C
    result, calls = run_module(
        {"coolant": coolant(19.2), "min_flow_lpm": 14.0, "slowdown_margin_c": 60.0}, gpus, text
    )
    assert calls == [TEMPERATURE, QUERY]
    first = next(c for c in result["checks"] if c["name"] == f"thermal.gpu_temp_c[{gpus[0]['uuid']}]")
    assert first["ok"] is False and (first["value"], first["limit"]) == (29.0, 27.0)
    assert first["message"].endswith("(its slowdown temperature 87 C less the margin 60 C)")
    assert result["verdict"] == "blocked"


def test_without_a_margin_nothing_more_is_read(read_fixture: Any) -> None:
    text = read_fixture(HGX_Q)
    gpus = parse_query_text(text)["gpus"]
    result, calls = run_module({"coolant": coolant(19.2), "min_flow_lpm": 14.0}, gpus, text)
    assert calls == [QUERY]
    first = next(c for c in result["checks"] if c["name"] == f"thermal.gpu_temp_c[{gpus[0]['uuid']}]")
    assert first["limit"] == 60.0 and "slowdown" not in first["message"]


def test_a_margin_out_of_range_is_refused_naming_the_role_input(read_fixture: Any) -> None:
    result, calls = run_module({"coolant": coolant(19.2), "slowdown_margin_c": 0.0}, [], "")
    assert result["failed"] is True and calls == []
    assert (
        "slowdown_margin_c (thermal_gate_slowdown_margin_c) must be above 0 and at most 150 C"
        in result["msg"]
    )
