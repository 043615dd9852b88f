"""gpufleet.node.coolant_facts against a local HTTPS BMC serving DMTF's mockups.

The BMC (FakeBmc from the client's tests) serves the cooling-unit tree merged with the
liquid-cooled server's chassis over TLS with a CA made for the test. What is asserted: the
facts, the session closed, and that the password and session token are nowhere in the result.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible_collections.gpufleet.node.plugins.modules import coolant_facts

from tests.unit.module_utils.mgmt.test_redfish_client import (
    PASSWORD,
    USER,
    FakeBmc,
    free_port,
    load_tree,
    make_tls,
)
from tests.unit.modules import harness


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    return make_tls(tmp_path_factory.mktemp("coolant-tls"))


@pytest.fixture
def bmc(fixtures_dir: Path, tls: tuple[Path, ssl.SSLContext]) -> Iterator[FakeBmc]:
    with FakeBmc(load_tree(fixtures_dir), tls[1]) as server:
        yield server


def run_module(args: dict[str, Any], check_mode: bool = False) -> tuple[dict[str, Any], list[str]]:
    run = harness.run_module(coolant_facts.main, args, check_mode)
    return run.result, run.warnings


def base_args(bmc: FakeBmc, ca: Path, **extra: Any) -> dict[str, Any]:
    return {"baseuri": bmc.url, "username": USER, "password": PASSWORD, "ca_path": str(ca), **extra}


@pytest.mark.parametrize("check_mode", [False, True])
def test_facts_from_the_mockups(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext], check_mode: bool) -> None:
    result, warnings = run_module(base_args(bmc, tls[0]), check_mode=check_mode)
    assert result["changed"] is False and "failed" not in result
    coolant = result["ansible_facts"]["gpufleet_coolant"]
    assert [
        (c["key"], c["supply_c"], c["return_c"], c["delta_c"], c["health"]) for c in coolant["connectors"]
    ] == [
        ("1U/CPU1", 14.8, 38.2, 23.4, "OK"),
        ("1U/CPU2", 22.4, 46.9, 24.5, "OK"),
    ]
    assert [c["flow_lpm"] for c in coolant["connectors"]] == [None, None]
    assert warnings == [
        "coolant connector 1U/CPU1 reports no flow reading; a gate on flow will block",
        "coolant connector 1U/CPU2 reports no flow reading; a gate on flow will block",
    ]
    assert coolant["cdus"][0]["health"] == "Warning"
    assert result["checks"] == []
    assert result["requests"] == len(bmc.log)
    assert bmc.sessions == {} and len(bmc.deleted) == 1
    text = json.dumps(result)
    assert PASSWORD not in text
    assert all(h.get("X-Auth-Token", "\0") not in text for _, _, h, _ in bmc.log)


def test_bad_credentials_fail_with_a_named_check(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    result, _ = run_module(base_args(bmc, tls[0], password="not-the-Pa55word"))
    assert result["failed"] is True
    assert result["checks"] == [
        {
            "name": f"coolant.bmc[{bmc.url}]",
            "ok": False,
            "value": "auth",
            "limit": "readings",
            "unit": "",
            "message": result["msg"],
        }
    ]
    assert "rejected the credentials" in result["msg"]
    assert "not-the-Pa55word" not in json.dumps(result)


def test_bmc_down_fails_closed() -> None:
    url = f"https://127.0.0.1:{free_port()}"
    result, _ = run_module(
        {"baseuri": url, "username": USER, "password": PASSWORD, "retries": 1, "retry_delay": 0.0}
    )
    assert result["failed"] is True
    assert result["checks"][0]["name"] == f"coolant.bmc[{url}]"
    assert result["checks"][0]["value"] == "connection"
    assert "connection refused" in result["msg"]
    assert result["requests"] == 2  # one try and one retry


def test_untrusted_certificate_is_refused(bmc: FakeBmc) -> None:
    result, _ = run_module({"baseuri": bmc.url, "username": USER, "password": PASSWORD})
    assert result["failed"] is True
    assert result["checks"][0]["value"] == "tls"
    assert "ca_path" in result["msg"]


def test_bad_baseuri(bmc: FakeBmc) -> None:
    result, _ = run_module({"baseuri": "ftp://bmc01", "username": USER, "password": PASSWORD})
    assert result["failed"] is True
    assert "not an http(s) address" in result["msg"]


def test_password_is_no_log() -> None:
    """Ansible masks no_log options in results, logs and callbacks (the fleet report included)."""
    # The module builds its AnsibleModule first; stop it there and read the spec it asked for.
    with (
        mock.patch.object(basic.AnsibleModule, "__init__", side_effect=RuntimeError("stop")) as init,
        pytest.raises(RuntimeError),
    ):
        coolant_facts.main()
    assert init.call_args.kwargs["argument_spec"]["password"]["no_log"] is True


@pytest.mark.parametrize(
    "name",
    ["coolant_facts", "thermal_gate", "burn_in", "service_check", "roce_health", "fabric", "switch_qos"],
)
def test_documentation_matches_argument_spec(name: str) -> None:
    """DOCUMENTATION options and the AnsibleModule argument_spec agree: names, types, defaults, choices."""
    import importlib

    import yaml

    module = importlib.import_module(f"ansible_collections.gpufleet.node.plugins.modules.{name}")
    with (
        mock.patch.object(basic.AnsibleModule, "__init__", side_effect=RuntimeError("stop")) as init,
        pytest.raises(RuntimeError),
    ):
        module.main()
    spec = init.call_args.kwargs["argument_spec"]
    assert init.call_args.kwargs["supports_check_mode"] is True
    options = harness.documentation(module)["options"]
    assert sorted(options) == sorted(spec)
    for key, doc in options.items():
        arg = spec[key]
        assert doc["type"] == arg.get("type", "str"), key
        assert doc.get("default") == arg.get("default"), key
        assert doc.get("choices") == arg.get("choices"), key
        assert doc.get("elements") == arg.get("elements"), key
        assert bool(doc.get("required")) == bool(arg.get("required")), key
        assert doc.get("aliases") == arg.get("aliases"), key
    for block in ("EXAMPLES", "RETURN"):
        assert yaml.safe_load(getattr(module, block))


# ---------------------------------------------------------------- issue 11: fail closed on the transport


@pytest.fixture
def http_bmc(fixtures_dir: Path) -> Iterator[FakeBmc]:
    """The BMC without TLS: whatever reaches it crossed the network in clear text."""
    with FakeBmc(load_tree(fixtures_dir)) as server:
        yield server


def test_plain_http_is_refused_before_the_password_is_sent(http_bmc: FakeBmc) -> None:
    result, _ = run_module({"baseuri": http_bmc.url, "username": USER, "password": PASSWORD})
    assert result["failed"] is True
    assert http_bmc.log == []  # the password never left the controller
    assert result["requests"] == 0
    assert f"BMC address {http_bmc.url} is plain HTTP" in result["msg"]
    assert "thermal_gate_bmc_address" in result["msg"] and "gpufleet_bmc_address" in result["msg"]
    assert "thermal_gate_bmc_insecure_http_reason" in result["msg"]
    assert result["checks"] == [
        {
            "name": f"coolant.bmc[{http_bmc.url}]",
            "ok": False,
            "value": "config",
            "limit": "readings",
            "unit": "",
            "message": result["msg"],
        }
    ]


def test_plain_http_with_a_reason_is_read_and_the_reason_is_reported(http_bmc: FakeBmc) -> None:
    reason = "CHG-4711 lab BMC, firmware without TLS, isolated management VLAN"
    result, warnings = run_module(
        {"baseuri": http_bmc.url, "username": USER, "password": PASSWORD, "insecure_http_reason": reason}
    )
    assert "failed" not in result and len(result["ansible_facts"]["gpufleet_coolant"]["connectors"]) == 2
    (hint,) = result["hints"]
    assert hint.startswith(f"BMC {http_bmc.url} is read over plain HTTP") and hint.endswith(reason)
    assert hint in warnings
    assert PASSWORD not in json.dumps(result)


def test_https_reports_no_transport_hint(bmc: FakeBmc, tls: tuple[Path, ssl.SSLContext]) -> None:
    result, _ = run_module(base_args(bmc, tls[0], insecure_http_reason="not needed"))
    assert "failed" not in result and result["hints"] == []


@pytest.mark.parametrize("content", [None, b"", b"not a certificate\n"])
def test_a_bad_ca_file_fails_at_once_naming_it(bmc: FakeBmc, tmp_path: Path, content: bytes | None) -> None:
    """Was 'could not reach BMC ... check the BMC address' after three retries."""
    ca = tmp_path / "bmc-ca.pem"
    if content is not None:
        ca.write_bytes(content)
    result, _ = run_module({**base_args(bmc, ca), "retry_delay": 0.0})
    assert result["failed"] is True
    assert f"CA file {ca} " in result["msg"] and "thermal_gate_bmc_ca_path" in result["msg"]
    assert "could not reach" not in result["msg"]
    assert result["requests"] == 0 and bmc.log == []
    assert result["checks"][0]["value"] == "config"


@pytest.mark.parametrize(
    ("option", "value"),
    [("retry_delay", float("nan")), ("retry_delay", float("inf")), ("retries", 1000), ("timeout", 0)],
)
def test_request_options_out_of_range_are_refused(bmc: FakeBmc, option: str, value: Any) -> None:
    result, _ = run_module({"baseuri": bmc.url, "username": USER, "password": PASSWORD, option: value})
    assert result["failed"] is True and option in result["msg"]
    assert bmc.log == []


def test_the_plain_http_reason_reaches_the_gate_report() -> None:
    """The hint travels like the gate's override: task result event -> the host's message."""
    from gpufleet import commands, runner

    hint = "BMC http://10.20.1.11 is read over plain HTTP (...), allowed by ...: CHG-4711 lab BMC"
    task = {
        "task": "Read the coolant loops from the BMC",
        "action": "gpufleet.node.coolant_facts",
        "outcome": "ok",
        "changed": False,
        "msg": "",
        "hints": [hint],
    }
    host = commands.gate_host(runner.HostResult.from_tasks("node01", [task]))
    assert host.status == "ok" and host.message == hint
