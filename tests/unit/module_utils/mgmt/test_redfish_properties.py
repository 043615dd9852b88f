"""The Redfish client on damaged BMC answers: every real Redfish capture, mutated (tests/unit/mutations.py),
gives data or RedfishError, nothing else; and the regressions that escaped before (issue 11).

Two ways in. Each capture in tests/fixtures/real/redfish (DMTF mockups, schema-guide examples,
the real HGX sensor) is damaged as an HTTP body and decoded the way the client decodes a body, then
given to every pure parser. And the whole walk: a BMC in memory (an ``opener`` with open_url's
signature, no sockets) serves the DMTF cooling-unit tree with the liquid-cooled server's chassis,
one document damaged, and read_coolant must return a report whose numbers are finite (JSON without
NaN) or raise RedfishError naming the BMC.
"""

from __future__ import annotations

import http.client
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.mgmt import redfish_client as rf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit import mutations
from tests.unit.module_utils.mgmt.test_redfish_client import load_tree

REDFISH = mutations.FIXTURES / "redfish"
CAPTURES = sorted(p.relative_to(mutations.FIXTURES).as_posix() for p in REDFISH.rglob("*.json"))
BASE = "https://bmc.test"
CONNECTOR = "/redfish/v1/Chassis/1U/ThermalSubsystem/CoolantConnectors/CPU1"
PROPERTY = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


class _Response(io.BytesIO):
    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.status = 200
        self.headers = {"Content-Type": "application/json"}


def memory_bmc(bodies: dict[str, bytes]) -> Callable[..., _Response]:
    """open_url's signature over raw bodies by path; a path it does not have answers {} (an empty object)."""

    def opener(url: str, **kwargs: Any) -> _Response:
        assert url.startswith(BASE + "/") and kwargs["method"] == "GET"
        # What http.client does with a URL it cannot send (open_url lets it through as ValueError).
        if any(not "!" <= ch <= "~" for ch in url):
            raise http.client.InvalidURL(f"URL can't contain control characters. {url!r}")
        return _Response(bodies.get(url[len(BASE) :].rstrip("/") or "/", b"{}"))

    return opener


def read(bodies: dict[str, bytes]) -> dict[str, Any]:
    client = rf.RedfishClient(BASE, "gate", "pw", auth="basic", retries=0, opener=memory_bmc(bodies))
    return client.read_coolant()


@pytest.fixture(scope="module")
def tree_bodies(fixtures_dir: Path) -> dict[str, bytes]:
    return {uri: json.dumps(doc).encode() for uri, doc in load_tree(fixtures_dir).items()}


def decode(body: bytes) -> Any:
    return rf.decode_json(body, f"BMC {BASE} answered GET /x")


def parse_everything(doc: Any) -> None:
    """Every pure parser the client uses, on one decoded document."""
    if not isinstance(doc, dict):
        return
    conn = rf.parse_connector(doc, key="k")
    json.dumps(conn, allow_nan=False)
    rf.parse_leak_detector(doc)
    detectors, link = rf.parse_leak_detection(doc)
    rf.leak_state(detectors)
    assert link is None or isinstance(link, str)
    for key in ("FlowLitersPerMinute", "SupplyTemperatureCelsius", "Reading", "ReadingCelsius"):
        value = rf.reading(doc.get(key))
        assert value is None or math.isfinite(value)


def test_every_redfish_capture_is_covered() -> None:
    # 106 DMTF JSON documents and the real HGX sensor; the cooling unit's $metadata is CSDL XML,
    # not an answer.
    assert len(CAPTURES) == 107
    assert "redfish/real/hgx-hmc-Sensor-HGX_GPU_SXM_1_TEMP_0.json" in CAPTURES


@pytest.mark.parametrize("capture", CAPTURES)
def test_each_capture_parses_as_it_is(capture: str) -> None:
    parse_everything(decode((mutations.FIXTURES / capture).read_bytes()))


@pytest.mark.parametrize("capture", CAPTURES)
@PROPERTY
@given(data=st.data())
def test_a_damaged_capture_gives_data_or_redfish_error(capture: str, data: st.DataObject) -> None:
    body = data.draw(mutations.mutated_bytes((mutations.FIXTURES / capture).read_bytes(), markup="json"))
    try:
        parse_everything(decode(body))
    except rf.RedfishError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_document_in_the_walk_gives_a_report_or_redfish_error(
    tree_bodies: dict[str, bytes], data: st.DataObject
) -> None:
    uri = data.draw(st.sampled_from(sorted(tree_bodies)))
    bodies = dict(tree_bodies)
    bodies[uri] = data.draw(mutations.mutated_bytes(bodies[uri], markup="json"))
    try:
        report = read(bodies)
    except rf.RedfishError as exc:
        assert BASE in str(exc)
        return
    json.dumps(report, allow_nan=False)


def test_the_undamaged_walk(tree_bodies: dict[str, bytes]) -> None:
    report = read(tree_bodies)
    assert [c["key"] for c in report["connectors"]] == ["1U/CPU1", "1U/CPU2"]
    assert [c["flow_lpm"] for c in report["cdus"][0]["connectors"]] == [42.0, 42.0]


# ---------------------------------------------------------------- the regressions of issue 11


def _connector(tree_bodies: dict[str, bytes], replace: tuple[str, str]) -> dict[str, bytes]:
    bodies = dict(tree_bodies)
    old, new = replace
    assert old.encode() in bodies[CONNECTOR]
    bodies[CONNECTOR] = bodies[CONNECTOR].replace(old.encode(), new.encode(), 1)
    return bodies


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("1e999", "not a finite number"),
        ("-1e999", "not a finite number"),
        ("NaN", "not a finite number"),
        ("Infinity", "not a finite number"),
        ("9" * 400, "too large"),
        ("-" + "9" * 400, "too large"),
    ],
)
def test_a_non_finite_or_overflowing_supply_temperature_is_an_error(
    tree_bodies: dict[str, bytes], number: str, said: str
) -> None:
    """1e999 parsed to inf and passed every check; a 400-digit integer raised OverflowError."""
    bodies = _connector(
        tree_bodies, ('"SupplyTemperatureCelsius": {', f'"SupplyTemperatureCelsius": {number}, "x": {{')
    )
    with pytest.raises(rf.RedfishError) as err:
        read(bodies)
    assert err.value.kind == "reading"
    message = str(err.value)
    assert said in message and BASE in message and "1U/CPU1" in message
    assert "SupplyTemperatureCelsius" in message
    assert len(message) < 400  # a 400-digit number is not quoted in full


def test_an_infinite_flow_is_an_error_not_a_pass() -> None:
    with pytest.raises(rf.RedfishError) as err:
        rf.parse_connector(json.loads('{"Id": "A", "FlowLitersPerMinute": {"Reading": 1e999}}'))
    assert err.value.kind == "reading" and "FlowLitersPerMinute" in str(err.value)


@pytest.mark.parametrize(
    ("prop", "value", "range_text"),
    [
        ("FlowLitersPerMinute", -4.8, "0..10000 L/min"),
        ("RatedFlowLitersPerMinute", -1, "0..10000 L/min"),
        ("FlowLitersPerMinute", 1e6, "0..10000 L/min"),
        ("SupplyTemperatureCelsius", -300, "-40..150 C"),
        ("ReturnTemperatureCelsius", 1500, "-40..150 C"),
        ("DeltaTemperatureCelsius", 500, "-100..100 K"),
    ],
)
def test_readings_outside_their_physical_range_are_errors(prop: str, value: float, range_text: str) -> None:
    with pytest.raises(rf.RedfishError) as err:
        rf.parse_connector({"Id": "A", prop: {"Reading": value}})
    assert err.value.kind == "reading"
    assert prop in str(err.value) and range_text in str(err.value)


@pytest.mark.parametrize(
    "prop", ["FlowLitersPerMinute", "SupplyTemperatureCelsius", "DeltaTemperatureCelsius"]
)
def test_the_range_ends_are_readings(prop: str) -> None:
    # zero flow is a reading (the judge fails it), not a faulty sensor
    assert rf.parse_connector({"Id": "A", prop: {"Reading": 0}})


def test_fifty_thousand_deep_json_is_a_redfish_error(tree_bodies: dict[str, bytes]) -> None:
    """json.loads raised RecursionError out of the client."""
    bodies = dict(tree_bodies)
    bodies[CONNECTOR] = b"[" * 50_000 + b"]" * 50_000
    with pytest.raises(rf.RedfishError) as err:
        read(bodies)
    assert err.value.kind == "protocol"
    assert "nested too deeply" in str(err.value) and BASE in str(err.value) and CONNECTOR in str(err.value)


def test_a_nan_retry_after_is_not_slept_on() -> None:
    class Exc:
        def __init__(self, value: str) -> None:
            self.headers = {"Retry-After": value}

    assert rf.RedfishClient._retry_after(Exc("nan"), 2.0) == 2.0
    assert rf.RedfishClient._retry_after(Exc("1e999"), 2.0) == 30.0
