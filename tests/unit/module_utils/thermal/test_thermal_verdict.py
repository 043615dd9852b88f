"""The thermal gate's decision on real GPU captures and DMTF's coolant mockups, table-driven."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
    parse_query_text,
    parse_query_xml,
)
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import redfish_client as rf
from ansible_collections.gpufleet.node.plugins.module_utils.thermal import thermal_verdict as tv

HGX_Q = "nvidia-smi-text/gpud-8xH100-80GB-HBM3-535.161.08-q.txt"
IDLE_Q = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-idle-q.txt"
LOAD_Q = "nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-q.txt"
A100_XML = "nvidia-smi-xml/telegraf-a100-sxm4-v12.xml"
MOCKUP = "redfish/dmtf"


def mockup(fixtures: Path, rel: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((fixtures / MOCKUP / rel / "index.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def server_coolant(fixtures_dir: Path) -> dict[str, Any]:
    """gpufleet_coolant as coolant_facts builds it from the liquid-cooled server and cooling unit."""
    base = "public-liquid-cooled-server/Chassis/1U/ThermalSubsystem/CoolantConnectors/"
    connectors = [rf.parse_connector(mockup(fixtures_dir, base + c), key="1U/" + c) for c in ("CPU1", "CPU2")]
    for conn in connectors:
        conn.pop("leak_detector_uris")
    cdu_doc = mockup(fixtures_dir, "public-cooling-unit/ThermalEquipment/CDUs/1")
    detectors, _ = rf.parse_leak_detection(
        mockup(fixtures_dir, "public-cooling-unit/ThermalEquipment/CDUs/1/LeakDetection")
    )
    cdu = {
        "id": cdu_doc["Id"],
        "health": cdu_doc["Status"]["Health"],
        "conditions": [
            {"message": c["Message"], "severity": c["Severity"]}
            for c in cdu_doc["Status"]["Conditions"]
            if c["Severity"] != "OK"
        ],
        "leak_detectors": detectors,
        "connectors": [],
    }
    box = {
        "id": "1U",
        "uri": "/redfish/v1/Chassis/1U",
        "health": "OK",
        "leak_detectors": [],
        "connectors": connectors,
    }
    return rf.coolant_report({"baseuri": "https://bmc"}, [box], [cdu])


def healthy_coolant(flow: float = 19.2, supply: float = 25.0, ret: float = 27.1) -> dict[str, Any]:
    """Two baseboard loops of a b300-16 node, as the reference deployment's BMC would show them."""
    return {
        "service": {},
        "chassis": [],
        "connectors": [
            {
                "key": f"1/Board{i}",
                "state": "Enabled",
                "health": "OK",
                "flow_lpm": flow,
                "supply_c": supply,
                "return_c": ret,
                "delta_c": round(ret - supply, 2),
                "leak": "OK",
            }
            for i in (0, 1)
        ],
        "cdus": [],
    }


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"]}


def test_hgx_capture_with_power_brake_and_mockup_without_flow_is_blocked(
    read_fixture: Any, server_coolant: dict[str, Any]
) -> None:
    gpus = parse_query_text(read_fixture(HGX_Q))["gpus"]
    result = tv.evaluate(gpus, server_coolant)
    checks = by_name(result)
    assert result["verdict"] == "blocked" and result["override"] is None
    gpu0 = gpus[0]["uuid"]
    reasons = checks[f"thermal.clocks_event_reasons[{gpu0}]"]
    assert (reasons["ok"], reasons["value"]) == (False, ["hw_slowdown", "hw_power_brake_slowdown"])
    assert reasons["message"].endswith("clocks held back by hw_slowdown, hw_power_brake_slowdown")
    # The mockup's cold plates give no flow reading: blocked, named, value null (fail closed).
    flow = checks["coolant.flow_lpm[1U/CPU1]"]
    assert (flow["ok"], flow["value"], flow["limit"], flow["unit"]) == (False, None, 10.0, "L/min")
    assert "not reported (fail closed)" in flow["message"]
    # 14.8 C supply is fine; 23.4 K over a cold plate exceeds the 15 K limit.
    assert checks["coolant.supply_temp_c[1U/CPU1]"]["ok"] is True
    delta = checks["coolant.delta_temp_c[1U/CPU1]"]
    assert (delta["ok"], delta["value"], delta["unit"]) == (False, 23.4, "K")
    # The CDU's pump failure shows in its health check.
    cdu = checks["coolant.cdu_health[1]"]
    assert (cdu["ok"], cdu["value"]) == (False, "Warning")
    assert "Pump '2' has failed." in cdu["message"]
    assert checks["coolant.cdu_leak[1]"]["ok"] is True
    assert set(result["failed_checks"]) >= {
        f"thermal.clocks_event_reasons[{gpu0}]",
        "coolant.flow_lpm[1U/CPU1]",
        "coolant.flow_lpm[1U/CPU2]",
        "coolant.cdu_health[1]",
    }
    # One check per reading per GPU: temperature, memory, T.Limit, reasons (hotspot is off by default).
    assert sum(1 for n in checks if n.startswith("thermal.")) == 4 * len(gpus)


def test_real_h100_idle_and_load(read_fixture: Any) -> None:
    idle = parse_query_text(read_fixture(IDLE_Q))["gpus"]
    load = parse_query_text(read_fixture(LOAD_Q))["gpus"]
    uuid = idle[0]["uuid"]
    cool = tv.evaluate(idle, healthy_coolant())
    assert cool["verdict"] == "pass", cool["failed_checks"]
    assert by_name(cool)[f"thermal.gpu_temp_c[{uuid}]"]["value"] == 41
    assert by_name(cool)[f"thermal.tlimit_c[{uuid}]"]["value"] == 46
    # The same GPU under gpu-burn (59 C, T.Limit 26, HBM 54) still passes the idle limits: an idle
    # gate does not replace the burn-in. Tighter per-profile limits catch it.
    hot = tv.evaluate(load, healthy_coolant())
    assert by_name(hot)[f"thermal.gpu_temp_c[{uuid}]"]["value"] == 59
    assert hot["verdict"] == "pass"
    stricter = tv.evaluate(load, healthy_coolant(), limits={"max_gpu_temp_c": 55, "min_tlimit_c": 30})
    assert stricter["failed_checks"] == [f"thermal.gpu_temp_c[{uuid}]", f"thermal.tlimit_c[{uuid}]"]
    tlimit = by_name(stricter)[f"thermal.tlimit_c[{uuid}]"]
    assert tlimit["message"].endswith("T.Limit margin 26 C, below the 30 C minimum")


def test_a100_xml_without_tlimit_fails_closed(read_fixture: Any) -> None:
    gpus = parse_query_xml(read_fixture(A100_XML))["gpus"]
    assert gpus[0]["temperature"]["tlimit_c"] is None  # A100s report no T.Limit
    result = tv.evaluate(gpus, healthy_coolant())
    check = by_name(result)[f"thermal.tlimit_c[{gpus[0]['uuid']}]"]
    assert (check["ok"], check["value"]) == (False, None)
    # Turning the reading off for that model is explicit, and the check is then not listed.
    result = tv.evaluate(gpus, healthy_coolant(), limits={"min_tlimit_c": None})
    assert not any(n.startswith("thermal.tlimit_c") for n in by_name(result))


def gpu(uuid: str = "GPU-1", **temps: Any) -> dict[str, Any]:
    temperature = {"gpu_c": 31, "memory_c": 36, "tlimit_c": 54}
    temperature.update(temps.pop("temperature", {}))
    return {
        "uuid": uuid,
        "index": 0,
        "temperature": temperature,
        "clocks_event_reasons": ["gpu_idle"],
        **temps,
    }


@pytest.mark.parametrize(
    ("change", "failed", "message"),
    [
        ({}, [], None),
        (
            {"temperature": {"gpu_c": 91}},
            ["thermal.gpu_temp_c[GPU-1]"],
            "temperature 91 C, above the 60 C limit",
        ),
        (
            {"temperature": {"gpu_c": None}},
            ["thermal.gpu_temp_c[GPU-1]"],
            "temperature not reported (fail closed)",
        ),
        (
            {"temperature": {"memory_c": 71}},
            ["thermal.memory_temp_c[GPU-1]"],
            "memory temperature 71 C, above",
        ),
        (
            {"temperature": {"tlimit_c": 4}},
            ["thermal.tlimit_c[GPU-1]"],
            "T.Limit margin 4 C, below the 20 C minimum",
        ),
        ({"temperature": {"tlimit_c": 20}}, [], None),
        (
            {"clocks_event_reasons": ["sw_thermal_slowdown"]},
            ["thermal.clocks_event_reasons[GPU-1]"],
            "sw_thermal",
        ),
        ({"clocks_event_reasons": ["sw_power_cap", "gpu_idle"]}, [], None),
        (
            {"clocks_event_reasons": None},
            ["thermal.clocks_event_reasons[GPU-1]"],
            "not reported (fail closed)",
        ),
        (
            {"temperature": None},
            ["thermal.gpu_temp_c[GPU-1]", "thermal.memory_temp_c[GPU-1]", "thermal.tlimit_c[GPU-1]"],
            "not reported",
        ),
    ],
)
def test_gpu_readings(change: dict[str, Any], failed: list[str], message: str | None) -> None:
    g = gpu()
    if "temperature" in change and change["temperature"] is None:
        g["temperature"] = None
    else:
        g["temperature"].update(change.get("temperature") or {})
    if "clocks_event_reasons" in change:
        g["clocks_event_reasons"] = change["clocks_event_reasons"]
    result = tv.evaluate([g], healthy_coolant())
    assert result["failed_checks"] == failed
    assert result["verdict"] == ("blocked" if failed else "pass")
    if message:
        assert message in by_name(result)[failed[0]]["message"]


@pytest.mark.parametrize(
    ("flow", "supply", "ret", "failed"),
    [
        (19.2, 25.0, 27.1, []),
        (6.2, 25.0, 31.5, ["coolant.flow_lpm[1/Board0]", "coolant.flow_lpm[1/Board1]"]),
        (19.2, 38.0, 40.0, ["coolant.supply_temp_c[1/Board0]", "coolant.supply_temp_c[1/Board1]"]),
        (19.2, 25.0, 41.0, ["coolant.delta_temp_c[1/Board0]", "coolant.delta_temp_c[1/Board1]"]),
        (10.0, 35.0, 50.0, []),  # every limit is inclusive
    ],
)
def test_coolant_readings(flow: float, supply: float, ret: float, failed: list[str]) -> None:
    result = tv.evaluate([gpu()], healthy_coolant(flow, supply, ret))
    assert result["failed_checks"] == failed
    flow_check = by_name(result)["coolant.flow_lpm[1/Board0]"]
    assert (flow_check["value"], flow_check["limit"], flow_check["unit"]) == (flow, 10.0, "L/min")


def test_per_profile_limits_name_the_reading_and_limit() -> None:
    result = tv.evaluate([gpu()], healthy_coolant(flow=11.5), limits={"min_flow_lpm": 14.0})
    check = by_name(result)["coolant.flow_lpm[1/Board0]"]
    assert check == {
        "name": "coolant.flow_lpm[1/Board0]",
        "ok": False,
        "value": 11.5,
        "limit": 14.0,
        "unit": "L/min",
        "message": "coolant connector 1/Board0 flow 11.5 L/min, below the 14 L/min minimum",
    }


@pytest.mark.parametrize(
    ("coolant", "require", "failed"),
    [
        (None, True, ["coolant.facts"]),
        (None, False, []),
        ({"connectors": [], "cdus": []}, True, ["coolant.connectors"]),
        ({"connectors": [], "cdus": []}, False, []),
    ],
)
def test_missing_coolant_fails_closed(
    coolant: dict[str, Any] | None, require: bool, failed: list[str]
) -> None:
    assert tv.evaluate([gpu()], coolant, require_coolant=require)["failed_checks"] == failed


def test_no_gpus_fails_closed() -> None:
    result = tv.evaluate([], healthy_coolant())
    assert result["failed_checks"] == ["thermal.gpus"] and result["verdict"] == "blocked"


@pytest.mark.parametrize(
    ("health", "leak", "required", "failed"),
    [
        ("OK", "OK", False, []),
        ("Warning", "OK", False, ["coolant.health[1/Board0]"]),
        (None, "OK", False, ["coolant.health[1/Board0]"]),
        ("OK", "Critical", False, ["coolant.leak[1/Board0]"]),
        ("OK", None, False, []),
        ("OK", None, True, ["coolant.leak[1/Board0]"]),
    ],
)
def test_health_and_leak(health: str | None, leak: str | None, required: bool, failed: list[str]) -> None:
    coolant = healthy_coolant()
    coolant["connectors"][0].update(health=health, leak=leak)
    result = tv.evaluate([gpu()], coolant, limits={"require_leak_detection": required})
    assert result["failed_checks"] == failed


def test_warning_health_can_be_allowed(server_coolant: dict[str, Any]) -> None:
    limits = {"allowed_health": ["OK", "Warning"]}
    assert by_name(tv.evaluate([gpu()], server_coolant, limits=limits))["coolant.cdu_health[1]"]["ok"] is True


def test_absent_connectors_are_not_judged() -> None:
    coolant = healthy_coolant()
    coolant["connectors"][1].update(state="Absent", flow_lpm=None)
    assert [n for n in by_name(tv.evaluate([gpu()], coolant)) if "Board1" in n] == []


def test_hotspot_limit_when_set_needs_the_reading() -> None:
    result = tv.evaluate([gpu()], healthy_coolant(), limits={"max_hotspot_c": 95.0})
    assert result["failed_checks"] == ["thermal.hotspot_c[GPU-1]"]
    hot = gpu(temperature={"hotspot_c": 97})
    result = tv.evaluate([hot], healthy_coolant(), limits={"max_hotspot_c": 95.0})
    assert by_name(result)["thermal.hotspot_c[GPU-1]"]["message"].endswith("97 C, above the 95 C limit")


@pytest.mark.parametrize(
    ("reason", "verdict", "override"),
    [
        (None, "blocked", None),
        ("", "blocked", None),
        ("   ", "blocked", None),
        (
            "CHG-4711 flow meter replaced, flow checked by hand",
            "overridden",
            "CHG-4711 flow meter replaced, flow checked by hand",
        ),
    ],
)
def test_override_needs_a_reason(reason: str | None, verdict: str, override: str | None) -> None:
    result = tv.evaluate([gpu()], healthy_coolant(flow=3.0), override_reason=reason)
    assert result["verdict"] == verdict
    assert len(result["checks"]) == 4 + 2 * 5 and result["failed_checks"] == [
        "coolant.flow_lpm[1/Board0]",
        "coolant.flow_lpm[1/Board1]",
    ]
    if override is None:
        assert result["override"] is None
    else:
        assert result["override"] == {"reason": override, "failed_checks": result["failed_checks"]}


def test_override_on_a_passing_node_is_recorded_but_passes() -> None:
    result = tv.evaluate([gpu()], healthy_coolant(), override_reason="routine")
    assert result["verdict"] == "pass"
    assert result["override"] == {"reason": "routine", "failed_checks": []}


def test_inputs_are_not_modified(server_coolant: dict[str, Any]) -> None:
    before = copy.deepcopy(server_coolant)
    tv.evaluate([gpu()], server_coolant)
    assert server_coolant == before
