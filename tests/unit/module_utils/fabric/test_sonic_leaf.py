"""plugins/module_utils/fabric/sonic_leaf.py on the real SONiC CONFIG_DB captures (tests/fixtures/real/sonic):
a SONiC leaf's reading judged by the NVUE leaves' judge (the same check names), its drift as CONFIG_DB
settings, the OS setting's refusal, and the refusal to change a SONiC leaf."""

from __future__ import annotations

import json
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import sonic_leaf, switch_qos
from ansible_collections.gpufleet.node.plugins.module_utils.fabric.fabric import judge_switch_port

from tests.unit.mutations import FIXTURES

SONIC = FIXTURES / "sonic"
AZURE = "sonic-utilities-config-qos-AZURE-maps-SUBSET.json"
PORT_QOS = "sonic-utilities-config_db-PORT_QOS_MAP.json"
MOCK = "sonic-utilities-mock-config_db-qos-SUBSET.json"
HOST = {"roce_dscp": 26, "cnp_dscp": 48, "priority": 3, "mtu": 4200}
# the module's defaults (the lossless RoCE profile), as the action plugin hands them to sonic_leaf.plan
PARAMS: dict[str, Any] = ArgumentSpecValidator(switch_qos.ARGUMENT_SPEC).validate({}).validated_parameters


def _read(name: str) -> str:
    return (SONIC / name).read_text(encoding="utf-8")


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_read(name))
    return document


def _judge(reading: dict[str, Any], port: str) -> dict[str, dict[str, Any]]:
    """The five link checks of ``port`` as the fabric role makes them (fabric.plan's lookup)."""
    qos = reading["port_qos"].get(port, reading["qos"])
    label = f"node01:mlx5_0 -> {reading['name']}:{port}"
    checks = judge_switch_port(label, HOST, qos, {"link": {"mtu": reading["mtu"].get(port)}})
    return {c["name"].split("[")[0]: c for c in checks}


def _settings(planned: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {c["setting"]: (c["from"], c["to"]) for c in planned["changes"]}


def _leaf(dscp_26: str = "3", **port_qos: str) -> str:
    """One SONiC leaf from the captures: the AZURE rendering's maps and WRED profile (DSCP 26 moved to
    ``dscp_26``), Ethernet0's PORT_QOS_MAP from the PORT_QOS_MAP capture (``port_qos`` over it, and
    its TC_TO_QUEUE_MAP the rendering's), its PORT and QUEUE entries from the mock (MTU 9216)."""
    document = _load(AZURE)
    document["DSCP_TO_TC_MAP"]["AZURE"]["26"] = dscp_26
    fields = {**_load(PORT_QOS)["PORT_QOS_MAP|Ethernet0"], **port_qos}
    document["PORT_QOS_MAP|Ethernet0"] = fields
    mock = _load(MOCK)
    document.update({k: v for k, v in mock.items() if k.startswith("QUEUE|")})
    document["PORT|Ethernet0"] = {**mock["PORT|Ethernet0"], "mtu": "9216"}
    return json.dumps(document)


# ------------------------------------------------------------------ the captures, judged


def test_mock_capture_port_known_by_name_and_alias_pfc_on_no_dscp_map() -> None:
    planned = sonic_leaf.plan(_read(MOCK), PARAMS, "leaf03")
    reading = planned["reading"]
    assert (reading["read"], reading["os"]) == (True, "sonic")
    assert reading["mtu"] == {"Ethernet0": 9100, "etp1": 9100, "Ethernet4": None, "Ethernet8": None}
    for port in ("Ethernet0", "etp1"):  # lldpmgrd advertises the alias; a plan may name either
        judged = _judge(reading, port)
        assert judged["fabric.switch_pfc"]["ok"] and judged["fabric.switch_pfc"]["value"] == [3, 4]
        # no DSCP_TO_TC_MAP bound: SONiC classifies nothing by DSCP, RoCE lands in TC 0
        assert (
            not judged["fabric.switch_dscp"]["ok"] and judged["fabric.switch_dscp"]["value"] == "trust none"
        )
        assert judged["fabric.switch_mtu"]["ok"] and judged["fabric.switch_mtu"]["value"] == 9100
        assert f"leaf03:{port}" in judged["fabric.switch_pfc"]["message"]
    # Ethernet8's PORT_QOS_MAP entry is empty: PFC off there
    assert _judge(reading, "Ethernet8")["fabric.switch_pfc"]["value"] == []
    settings = _settings(planned)
    assert settings["PORT|Ethernet0 mtu"] == (9100, 9216)
    assert settings["PORT_QOS_MAP|Ethernet8 pfc_enable"] == ("", "3")
    assert settings["PORT_QOS_MAP|Ethernet0 dscp_to_tc_map"][0] is None
    assert "PORT_QOS_MAP|Ethernet0 pfc_enable" not in settings
    assert planned["checks"][0]["name"] == "switch.sonic[leaf03]" and planned["checks"][0]["ok"]


def test_port_qos_capture_two_ports_without_pfc_are_the_ones_that_differ() -> None:
    planned = sonic_leaf.plan(_read(PORT_QOS), PARAMS, "leaf04")
    reading = planned["reading"]
    assert sorted(reading["port_qos"]) == ["Ethernet92", "Ethernet96"]  # the common view: PFC on 3, 4
    assert _judge(reading, "Ethernet0")["fabric.switch_pfc"]["value"] == [3, 4]
    assert _judge(reading, "Ethernet100")["fabric.switch_pfc"]["ok"]
    pfc92 = _judge(reading, "Ethernet92")["fabric.switch_pfc"]
    assert (pfc92["ok"], pfc92["value"], pfc92["limit"]) == (False, [], [3])
    # that test's stub AZURE map holds only DSCP 0: the RoCE DSCP is in no class
    assert _judge(reading, "Ethernet0")["fabric.switch_dscp"]["value"] == "priority None"
    settings = _settings(planned)
    assert settings["PORT_QOS_MAP|Ethernet92 pfc_enable"] == ("", "3")
    assert settings["DSCP_TO_TC_MAP|AZURE 26"] == (None, 3)
    # a map shared by every port is one setting, not one per port
    assert [c["setting"] for c in planned["changes"]].count("DSCP_TO_TC_MAP|AZURE 26") == 1


def test_azure_rendering_alone_has_no_ports() -> None:
    planned = sonic_leaf.plan(_read(AZURE), PARAMS, "leaf05")
    assert planned["reading"]["read"] and planned["reading"]["mtu"] == {} and planned["changes"] == []


def test_stock_azure_map_puts_roce_in_lossy_tc1() -> None:
    reading = sonic_leaf.plan(_leaf(dscp_26="1"), PARAMS, "leaf06")["reading"]
    judged = _judge(reading, "etp1")
    assert (judged["fabric.switch_dscp"]["ok"], judged["fabric.switch_dscp"]["value"]) == (
        False,
        "priority 1",
    )
    assert "(a lossy class)" in judged["fabric.switch_dscp"]["message"]


# ------------------------------------------------------------------ a leaf with the profile, then a fault


def test_a_leaf_with_the_profile_passes_every_check_and_has_no_drift() -> None:
    planned = sonic_leaf.plan(_leaf(), PARAMS, "leaf01")
    judged = _judge(planned["reading"], "Ethernet0")
    assert sorted(judged) == [
        "fabric.cnp_priority",
        "fabric.switch_dscp",
        "fabric.switch_ecn",
        "fabric.switch_mtu",
        "fabric.switch_pfc",
    ]
    assert all(c["ok"] for c in judged.values()), judged
    assert judged["fabric.switch_ecn"]["value"] == "traffic class 3 ECN-marked"
    assert planned["changes"] == [] and planned["errors"] == []


def test_pfc_off_is_named_as_on_an_nvue_leaf() -> None:
    planned = sonic_leaf.plan(_leaf(pfc_enable="4"), PARAMS, "leaf01")
    pfc = _judge(planned["reading"], "etp1")["fabric.switch_pfc"]
    assert (pfc["ok"], pfc["value"], pfc["limit"]) == (False, [4], [3])
    assert pfc["name"] == "fabric.switch_pfc[node01:mlx5_0 -> leaf01:etp1]"
    assert _settings(planned) == {"PORT_QOS_MAP|Ethernet0 pfc_enable": ("4", "3,4")}


def test_ecn_off_and_mtu_low() -> None:
    document = json.loads(_leaf())
    document["QUEUE|Ethernet0|3"].pop("wred_profile")
    document["PORT|Ethernet0"]["mtu"] = "1500"
    planned = sonic_leaf.plan(json.dumps(document), PARAMS, "leaf01")
    judged = _judge(planned["reading"], "Ethernet0")
    assert not judged["fabric.switch_ecn"]["ok"] and not judged["fabric.switch_mtu"]["ok"]
    assert judged["fabric.switch_mtu"]["value"] == 1500
    assert _settings(planned) == {
        "QUEUE|Ethernet0|3 wred_profile": (None, "a WRED_PROFILE that marks ECN"),
        "PORT|Ethernet0 mtu": (1500, 9216),
    }


def test_manage_leaves_out_what_it_does_not_name() -> None:
    planned = sonic_leaf.plan(_leaf(pfc_enable="4"), dict(PARAMS, manage=["mtu"]), "leaf01")
    assert planned["changes"] == []


# ------------------------------------------------------------------ refusals


def test_unreadable_output_is_an_unread_leaf() -> None:
    planned = sonic_leaf.plan('{"PORT": {"Ethernet0": {"mtu": "huge"}}}', PARAMS, "leaf02")
    assert planned["reading"]["read"] is False and planned["reading"]["kind"] == "parse"
    (read,) = planned["checks"]
    assert read["name"] == "switch.sonic[leaf02]" and not read["ok"]
    assert "sonic-cfggen -d --print-data" in read["message"] and "not a number" in read["message"]


def test_a_port_the_leaf_lacks_is_an_input_error_its_alias_is_not() -> None:
    assert sonic_leaf.plan(_read(MOCK), dict(PARAMS, ports=["etp1", "Ethernet8"]), "leaf03")["errors"] == []
    errors = sonic_leaf.plan(_read(MOCK), dict(PARAMS, ports=["swp9"]), "leaf03")["errors"]
    assert errors == [
        "ports (switch_qos_ports) names swp9, which leaf03 does not have; its 3 ports are "
        "Ethernet0, Ethernet4, Ethernet8"
    ]


def test_the_os_setting_is_refused_naming_it_and_the_allowed_values() -> None:
    params = dict(PARAMS, os="junos", name="leaf01", timeout=10, address=None, username=None, password=None)
    (error,) = switch_qos.input_errors(params)
    assert error.startswith("os (gpufleet_switch_os) is 'junos'; allowed: cumulus, sonic")
    assert switch_qos.input_errors(dict(params, os="sonic")) == []
    # a Cumulus leaf still needs its NVUE address and account, named by their inventory settings
    assert switch_qos.input_errors(dict(params, os="cumulus")) == [
        "address (gpufleet_switch_address) is required for a Cumulus leaf (NVUE's REST API)",
        "username (gpufleet_switch_username) is required for a Cumulus leaf (NVUE's REST API)",
        "password (gpufleet_switch_password) is required for a Cumulus leaf (NVUE's REST API)",
    ]


def test_refusal_names_the_leaf_sonic_and_what_differs() -> None:
    planned = sonic_leaf.plan(_leaf(pfc_enable="4"), PARAMS, "leaf01")
    message = sonic_leaf.refusal("leaf01", planned["changes"])
    assert message.startswith("leaf01 runs SONiC (gpufleet_switch_os: sonic), which gpufleet reads and never")
    assert "PORT_QOS_MAP|Ethernet0 pfc_enable" in message and "1 setting(s)" in message
