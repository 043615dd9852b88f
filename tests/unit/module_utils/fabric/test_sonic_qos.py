"""plugins/module_utils/fabric/sonic_qos.py on the real SONiC CONFIG_DB captures (tests/fixtures/real/sonic,
INDEX.md §9), and the lossless questions on a switch assembled from them.

The stock AZURE map sends the host's RoCE DSCP 26 to TC 1, a lossy class: the issue's example of
a switch that drops RoCE traffic although every port has PFC on 3 and 4.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import sonic_qos

from tests.unit.mutations import FIXTURES

SONIC = FIXTURES / "sonic"
AZURE = "sonic-utilities-config-qos-AZURE-maps-SUBSET.json"
PORT_QOS = "sonic-utilities-config_db-PORT_QOS_MAP.json"
MOCK = "sonic-utilities-mock-config_db-qos-SUBSET.json"
ROCE_DSCP = 26  # ToS 106 >> 2
CNP_DSCP = 48


def _read(name: str) -> str:
    return (SONIC / name).read_text(encoding="utf-8")


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_read(name))
    return document


def test_every_capture_is_asserted() -> None:
    assert sorted(p.name for p in SONIC.iterdir()) == sorted((AZURE, PORT_QOS, MOCK))


# ------------------------------------------------------------------ the captures


def test_azure_maps_send_roce_dscp_26_to_lossy_tc1() -> None:
    qos = sonic_qos.parse_config_db(_read(AZURE))
    azure = qos["dscp_to_tc"]["AZURE"]
    assert len(azure) == 64 and sorted(azure) == list(range(64))
    assert (azure[ROCE_DSCP], azure[3], azure[4], azure[CNP_DSCP], azure[46], azure[8], azure[5]) == (
        1,
        3,
        4,
        6,
        5,
        0,
        2,
    )
    assert sorted(dscp for dscp, tc in azure.items() if tc == 1) == [
        d for d in range(64) if d not in (3, 4, 5, 8, 46, 48)
    ]
    assert qos["tc_to_pg"]["AZURE"] == {0: 0, 1: 0, 2: 0, 3: 3, 4: 4, 5: 0, 6: 0, 7: 7}
    assert qos["tc_to_queue"]["AZURE"] == {tc: tc for tc in range(8)}
    assert qos["pfc_priority_to_queue"]["AZURE"] == {p: p for p in range(8)}
    wred = qos["wred_profiles"]["AZURE_LOSSLESS"]
    assert (wred["ecn"], wred["green_min_threshold"], wred["green_max_threshold"]) == (
        "ecn_all",
        1048576,
        2097152,
    )
    assert (wred["green_drop_probability"], wred["wred_green_enable"]) == (5, True)
    assert qos["ports"] == {}  # PORT_QOS_MAP and QUEUE are empty in that rendering


def test_port_qos_map_capture_pfc_on_3_and_4_on_two_ports() -> None:
    qos = sonic_qos.parse_config_db(_read(PORT_QOS))
    ports = qos["ports"]
    assert sorted(ports) == ["Ethernet0", "Ethernet100", "Ethernet92", "Ethernet96"]
    assert {name: port["pfc_enable"] for name, port in ports.items()} == {
        "Ethernet0": [3, 4],
        "Ethernet100": [3, 4],
        "Ethernet92": [],
        "Ethernet96": [],
    }
    for port in ports.values():
        assert (
            port["dscp_to_tc_map"],
            port["tc_to_pg_map"],
            port["tc_to_queue_map"],
            port["pfc_to_queue_map"],
        ) == (
            "AZURE",
            "AZURE",
            "AZURE",
            "AZURE",
        )
        assert port["dscp_to_tc"] == {0: 0}  # that test's stub map, as the dump holds it
        assert (port["speed_mbps"], port["mtu"]) == (1000, None)
    assert sonic_qos.tc_has_pfc(qos, "Ethernet0", 3) and not sonic_qos.tc_has_pfc(qos, "Ethernet92", 3)


def test_mock_config_db_mtu_queues_wred_and_buffer_pgs() -> None:
    qos = sonic_qos.parse_config_db(_read(MOCK))
    assert sorted(qos["ports"]) == ["Ethernet0", "Ethernet4", "Ethernet8"]
    eth0 = qos["ports"]["Ethernet0"]
    assert (eth0["mtu"], eth0["speed_mbps"], eth0["alias"], eth0["pfc_enable"]) == (
        9100,
        40000,
        "etp1",
        [3, 4],
    )
    assert eth0["dscp_to_tc_map"] is None and eth0["dscp_to_tc"] is None
    assert sorted(eth0["queues"]) == [0, 1, 2, 3, 4, 5, 6]
    assert {q: e["wred_profile"] for q, e in eth0["queues"].items() if e["wred_profile"]} == {
        3: "AZURE_LOSSLESS",
        4: "AZURE_LOSSLESS",
    }
    assert eth0["queues"][3]["scheduler"] == "scheduler.1"  # '[SCHEDULER|scheduler.1]' dereferenced
    assert eth0["buffer_pg"] == {0: "ingress_lossy_profile", 3: "NULL", 4: "NULL"}  # key '3-4' expanded
    assert [sonic_qos.queue_ecn(qos, "Ethernet0", q) for q in range(8)] == [None] * 3 + ["ecn_all"] * 2 + [
        None
    ] * 3
    assert sonic_qos.port_mtu(qos, "Ethernet0") == 9100 and sonic_qos.port_mtu(qos, "Ethernet4") is None
    assert qos["ports"]["Ethernet8"]["pfc_enable"] == []


# ------------------------------------------------------------------ the lossless path on one switch


def _switch(**port_qos: str) -> dict[str, Any]:
    """The AZURE rendering (maps, WRED) with Ethernet0's PORT_QOS_MAP from the PORT_QOS_MAP capture
    and its PORT and QUEUE entries from the mock: one leaf as a dump would show it."""
    document = _load(AZURE)
    document["PORT_QOS_MAP|Ethernet0"] = {**_load(PORT_QOS)["PORT_QOS_MAP|Ethernet0"], **port_qos}
    mock = _load(MOCK)
    document.update({k: v for k, v in mock.items() if k.startswith(("PORT|", "QUEUE|"))})
    return sonic_qos.parse_config_db(json.dumps(document))


def test_stock_azure_leaf_drops_roce_dscp_26_into_a_lossy_class() -> None:
    qos = _switch()
    roce = sonic_qos.dscp_path(qos, "Ethernet0", ROCE_DSCP)
    assert roce == {"dscp": 26, "tc": 1, "queue": 1, "lossless": False, "ecn": None, "mtu": 9100}
    # DSCP 3 is the lossless, ECN-marked class the AZURE profile means for RDMA
    assert sonic_qos.dscp_path(qos, "Ethernet0", 3) == {
        "dscp": 3,
        "tc": 3,
        "queue": 3,
        "lossless": True,
        "ecn": "ecn_all",
        "mtu": 9100,
    }
    cnp = sonic_qos.dscp_path(qos, "Ethernet0", CNP_DSCP)
    assert (cnp["tc"], cnp["lossless"]) == (6, False)


def test_a_custom_map_puts_dscp_26_in_the_lossless_class() -> None:
    document = _load(AZURE)
    document["DSCP_TO_TC_MAP"]["ROCE"] = dict(document["DSCP_TO_TC_MAP"]["AZURE"], **{"26": "3"})
    document["PORT_QOS_MAP|Ethernet0"] = {
        "dscp_to_tc_map": "[DSCP_TO_TC_MAP|ROCE]",
        "pfc_enable": "3",
        "tc_to_queue_map": "AZURE",
    }
    document["QUEUE"] = {"Ethernet0,Ethernet4|3-4": {"wred_profile": "AZURE_LOSSLESS"}}
    qos = sonic_qos.parse_config_db(json.dumps(document))
    assert qos["ports"]["Ethernet0"]["dscp_to_tc_map"] == "ROCE"
    path = sonic_qos.dscp_path(qos, "Ethernet0", ROCE_DSCP)
    assert (path["tc"], path["queue"], path["lossless"], path["ecn"], path["mtu"]) == (
        3,
        3,
        True,
        "ecn_all",
        None,
    )
    assert sorted(qos["ports"]["Ethernet4"]["queues"]) == [3, 4]
    assert sonic_qos.dscp_tc(qos, "Ethernet4", ROCE_DSCP) is None  # no DSCP map on that port


def test_global_dscp_map_is_not_a_port() -> None:
    document = _load(AZURE)
    document["PORT_QOS_MAP"] = {"global": {"dscp_to_tc_map": "AZURE"}}
    qos = sonic_qos.parse_config_db(json.dumps(document))
    assert qos["global"] == {"dscp_to_tc_map": "AZURE"} and qos["ports"] == {}


def test_unknown_port_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="no QoS for port Ethernet200"):
        sonic_qos.dscp_path(_switch(), "Ethernet200", ROCE_DSCP)


# ------------------------------------------------------------------ malformed input


def _azure_with(edit: Any) -> str:
    document = _load(AZURE)
    edit(document)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("[]", "not an object of tables"),
        ('{"DSCP_TO_TC_MAP": ', "not JSON"),
        ('{"DSCP_TO_TC_MAP": []}', "table DSCP_TO_TC_MAP is not an object"),
        (_read(AZURE).replace('"26": "1"', '"26": "-1"'), r"DSCP_TO_TC_MAP\|AZURE DSCP 26 TC is '-1'"),
        (_read(AZURE).replace('"26": "1"', '"64": "1"'), "DSCP is 64, not within 0..63"),
        (_read(AZURE).replace('"26": "1"', '"26": "1e1"'), "not a number"),
        (_read(AZURE).replace('"26": "1"', '"26": "\u0661"'), "not a number"),
        (_read(AZURE).replace('"26": "1"', '"26": 1'), "not an object of strings"),
        (_read(AZURE).replace('"ecn_all"', '"ecn_most"'), "ecn is 'ecn_most'"),
        (_read(AZURE).replace('"green_drop_probability": "5"', '"green_drop_probability": "101"'), "101"),
        (_read(AZURE).replace('"wred_red_enable": "true"', '"wred_red_enable": "yes"'), "not true or false"),
        (_read(AZURE).replace("AZURE_LOSSLESS", "AZURE\udce9"), "not UTF-8"),
        (_read(PORT_QOS).replace('"pfc_enable": "3,4"', '"pfc_enable": "3,8"', 1), "pfc_enable is 8"),
        (_read(PORT_QOS).replace('"pfc_enable": "3,4"', '"pfc_enable": "3,3"', 1), "repeats a priority"),
        (_read(PORT_QOS).replace('"PORT|Ethernet0"', '"PORT|Ether net0"'), "does not name a port"),
        (_read(MOCK).replace('"mtu": "9100"', '"mtu": "0"'), "mtu is 0"),
        (_read(MOCK).replace('"QUEUE|Ethernet0|6"', '"QUEUE|Ethernet0|16"'), "queue is 16"),
        (_read(MOCK).replace('"BUFFER_PG|Ethernet0|3-4"', '"BUFFER_PG|Ethernet0|4-3"'), "runs backwards"),
        (
            _read(MOCK).replace("[SCHEDULER|scheduler.1]", "[WRED_PROFILE|scheduler.1]"),
            "not a reference to SCHEDULER",
        ),
        (
            _azure_with(lambda d: d.update({"DSCP_TO_TC_MAP|AZURE": {"0": "0"}})),
            r"DSCP_TO_TC_MAP\|AZURE is defined twice",
        ),
        ("[" * 5000 + "]" * 5000, "nested too deeply|not an object of tables"),
    ],
)
def test_malformed_config_db_is_a_parse_error_naming_sonic(text: str, message: str) -> None:
    with pytest.raises(sonic_qos.ParseError, match=rf"^SONiC CONFIG_DB: .*({message})"):
        sonic_qos.parse_config_db(text)
