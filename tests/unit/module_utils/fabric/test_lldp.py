"""plugins/module_utils/fabric/lldp.py on the real lldpctl captures (tests/fixtures/real/lldp, INDEX.md §9).

Every capture parses to the neighbours asserted here; the shapes `-f json` takes with other
neighbour counts (one interface as an object, mgmt-ip as a list, a chassis with no name) are
built from the real captures, and `-f json0` and `-f json` of the same neighbours give the same
result. Malformed input fails with a ParseError whose message starts with "lldpctl: ".
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import lldp

from tests.json_shape import setter
from tests.unit.mutations import FIXTURES

LLDP = FIXTURES / "lldp"
HUAWEI = "sichek-bjg45-huawei-lldpctl-json.json"
H3C = "sichek-clnet36-lldpctl-json.json"
SONIC = "unifabric-5nic-sonic-leaves-lldpctl-json0.json"
# Debian's lldpd 1.0.16 hearing another (tests/conformance/test_lldpd_real.py's namespaces), per format
DEBIAN = {fmt: f"debian-lldpd-1.0.16-lldpctl-{fmt}.json" for fmt in ("json0", "json")}


def _read(name: str) -> str:
    return (LLDP / name).read_text(encoding="utf-8")


def _summary(neighbours: dict[str, list[dict[str, Any]]]) -> dict[str, tuple[Any, ...]]:
    return {
        iface: (n["chassis_name"], n["port_id"], n["port_id_type"], n["port_descr"], n["mgmt_ip"], n["mfs"])
        for iface, heard in neighbours.items()
        for n in heard
    }


# ------------------------------------------------------------------ the captures


def test_huawei_json_one_neighbour() -> None:
    neighbours = lldp.parse_lldpctl(_read(HUAWEI))
    assert list(neighbours) == ["ens11f0"]
    [n] = neighbours["ens11f0"]
    assert n == {
        "chassis_name": "bj08-m1-a10-40-swl017",
        "chassis_id": "0c:4f:9b:c4:18:61",
        "chassis_id_type": "mac",
        "chassis_descr": "Huawei CE6863E",
        "port_id": "25GE1/0/39",
        "port_id_type": "ifname",
        "port_descr": None,
        "mgmt_ip": ["214.30.0.21"],
        "mfs": 9216,
        "ttl": 120,
        "via": "LLDP",
        "age": "3 days, 01:12:02",
    }


def test_h3c_json_two_neighbours_one_without_mgmt_ip() -> None:
    neighbours = lldp.parse_lldpctl(_read(H3C))
    assert _summary(neighbours) == {
        "ens14f0np0": ("CL-A052A", "Twenty-FiveGigE1/0/16", "ifname", "SDN_LAGG", [], 9416),
        "eth0": (
            "CL-RLF233",
            "FourHundredGigE1/0/98",
            "ifname",
            "To-changliu-g86-114-eth0",
            ["26.9.135.254"],
            9216,
        ),
    }
    assert neighbours["eth0"][0]["chassis_descr"] == "H3C S9827-128DH"
    assert neighbours["ens14f0np0"][0]["ttl"] == 121


def test_sonic_json0_five_nics_on_five_switches() -> None:
    neighbours = lldp.parse_lldpctl(_read(SONIC))
    assert _summary(neighbours) == {
        "ens1np0": ("StorageSW", "Ethernet120", "local", "Ethernet120", ["10.193.77.211"], None),
        "ens841np0": ("LEAF03", "Ethernet184", "local", "Ethernet184", ["10.193.77.203"], None),
        "ens842np0": ("LEAF04", "Ethernet184", "local", "Ethernet184", ["10.193.77.204"], None),
        "ens110np0": ("LEAF02", "Ethernet184", "local", "Ethernet184", ["10.193.77.202"], None),
        "ens108np0": ("LEAF01", "Ethernet184", "local", "Ethernet184", ["10.193.77.201"], None),
    }
    # lldpctl's order (its rid order is not kept: 1, 3, 2, 7, 6)
    assert list(neighbours) == ["ens1np0", "ens841np0", "ens842np0", "ens110np0", "ens108np0"]
    assert all(len(heard) == 1 for heard in neighbours.values())
    assert neighbours["ens110np0"][0]["chassis_id"] == "70:06:92:6e:34:80"
    assert neighbours["ens110np0"][0]["chassis_descr"].startswith("SONiC Software Version: SONiC.CuOS_4.0")
    assert neighbours["ens108np0"][0]["age"] == "0 day, 01:25:26"


def test_lldpd_1_0_16_both_formats_two_ports_on_one_leaf() -> None:
    neighbours = lldp.parse_lldpctl(_read(DEBIAN["json0"]))
    mgmt = ["192.0.2.2", "fe80::6c82:48ff:feaf:8558"]  # eth0's address, then a port's link-local
    assert _summary(neighbours) == {
        "ens1np0": ("leaf01", "swp1", "ifname", "node01 mlx5_0", mgmt, None),
        "ens2np0": ("leaf01", "swp2", "ifname", "swp2", mgmt, None),
    }
    assert neighbours["ens1np0"][0]["ttl"] == 4  # tx-interval 1 s x tx-hold 4
    # the same neighbours read in the same second: -f json (mgmt-ip a list) gives the same result
    assert lldp.parse_lldpctl(_read(DEBIAN["json"])) == neighbours


def test_every_capture_is_asserted() -> None:
    assert sorted(p.name for p in LLDP.iterdir()) == sorted((HUAWEI, H3C, SONIC, *DEBIAN.values()))


# ------------------------------------------------------------------ the other -f json shapes


def _json0_to_json(document: dict[str, Any]) -> dict[str, Any]:
    """What lldpd's `-f json` prints for the neighbours a `-f json0` document holds."""

    def leaf(items: list[dict[str, Any]]) -> Any:
        values = [item["value"] for item in items]
        return values[0] if len(values) == 1 else values

    interfaces = []
    for entry in document["lldp"][0]["interface"]:
        chassis, port = entry["chassis"][0], entry["port"][0]
        body = {k: leaf(v) for k, v in chassis.items() if k not in ("id", "name", "capability")}
        body["id"] = dict(chassis["id"][0])
        port_body = {k: leaf(v) for k, v in port.items() if k != "id"}
        port_body["id"] = dict(port["id"][0])
        interfaces.append(
            {
                entry["name"]: {
                    "via": entry["via"],
                    "rid": entry["rid"],
                    "age": entry["age"],
                    "chassis": {leaf(chassis["name"]): body},
                    "port": port_body,
                }
            }
        )
    return {"lldp": {"interface": interfaces}}


def test_json_and_json0_of_the_same_neighbours_agree() -> None:
    json0 = json.loads(_read(SONIC))
    assert lldp.parse_lldpctl(json.dumps(_json0_to_json(json0))) == lldp.parse_lldpctl(_read(SONIC))


def test_json_one_interface_as_an_object_and_mgmt_ip_as_a_list() -> None:
    document = json.loads(_read(HUAWEI))
    entry = document["lldp"]["interface"][0]  # one neighbour: lldpd writes the object itself
    entry["ens11f0"]["chassis"]["bj08-m1-a10-40-swl017"]["mgmt-ip"] = [
        "214.30.0.21",
        "fe80::0e4f:9bff:fec4:1861",
    ]
    document["lldp"]["interface"] = entry
    [n] = lldp.parse_lldpctl(json.dumps(document))["ens11f0"]
    assert n["chassis_name"] == "bj08-m1-a10-40-swl017"
    assert n["mgmt_ip"] == ["214.30.0.21", "fe80::e4f:9bff:fec4:1861"]


def test_json_chassis_without_a_system_name_is_not_keyed() -> None:
    document = json.loads(_read(HUAWEI))
    iface = document["lldp"]["interface"][0]["ens11f0"]
    iface["chassis"] = iface["chassis"]["bj08-m1-a10-40-swl017"]
    [n] = lldp.parse_lldpctl(json.dumps(document))["ens11f0"]
    assert (n["chassis_name"], n["chassis_id"], n["chassis_descr"]) == (
        None,
        "0c:4f:9b:c4:18:61",
        "Huawei CE6863E",
    )
    iface["chassis"] = {"id": iface["chassis"]["id"]}  # nothing but the ID
    [n] = lldp.parse_lldpctl(json.dumps(document))["ens11f0"]
    assert (n["chassis_name"], n["chassis_id"]) == (None, "0c:4f:9b:c4:18:61")


def test_two_neighbours_on_one_port_are_both_kept_and_neighbour_of_refuses_them() -> None:
    document = json.loads(_read(SONIC))
    interfaces = document["lldp"][0]["interface"]
    extra = copy.deepcopy(interfaces[1])
    extra["name"] = interfaces[0]["name"]
    interfaces.insert(1, extra)
    neighbours = lldp.parse_lldpctl(json.dumps(document))
    assert [n["chassis_name"] for n in neighbours["ens1np0"]] == ["StorageSW", "LEAF03"]
    with pytest.raises(
        lldp.ParseError, match=r"^lldpctl: ens1np0 hears 2 neighbours \(StorageSW:Ethernet120"
    ):
        lldp.neighbour_of(neighbours, "ens1np0")
    assert lldp.neighbour_of(neighbours, "ens842np0")["chassis_name"] == "LEAF04"
    assert lldp.neighbour_of(neighbours, "ens9np0") is None


@pytest.mark.parametrize(
    "text", ['{"lldp": {}}', '{"lldp": [{}]}', '{"lldp": []}', '{"lldp": {"interface": []}}']
)
def test_no_neighbour_at_all_is_an_empty_dict(text: str) -> None:
    assert lldp.parse_lldpctl(text + "\n") == {}


# ------------------------------------------------------------------ malformed input


def _sonic(edit: Any) -> str:
    document = json.loads(_read(SONIC))
    edit(document["lldp"][0]["interface"][0])
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("  \n", "empty output"),
        ('{"lldp": ', "not JSON"),
        ("[]", 'no top-level "lldp"'),
        ('{"lldp": 3}', "neither an object"),
        ('{"lldp": [{"interface": {"a": 1}}]}', "not a list of objects"),
        ('{"lldp": {"interface": [1]}}', "interface entry is not an object"),
        ("[" * 5000 + "]" * 5000, "nested too deeply|no top-level"),
        ('{"lldp": {"interface": {"eth 0": {"chassis": {}, "port": {}}}}}', "not an interface name"),
        (_read(HUAWEI).replace('"25GE1/0/39"', "25"), "port id is 25"),
        (_read(HUAWEI).replace('"9216"', '"99999"'), "mfs is '99999'"),
        (_read(HUAWEI).replace('"9216"', '"-1"'), "mfs is '-1'"),
        (_read(HUAWEI).replace('"9216"', '"\u0661\u0662"'), "a digit that is not 0-9"),
        (_read(HUAWEI).replace('"9216"', '"\\u0661\\u0662"'), "not 0-9.* in the string '\u0661\u0662'"),
        (_read(HUAWEI).replace('"214.30.0.21"', '"214.30.0.256"'), "not an IP address"),
        (_read(HUAWEI).replace("Huawei", "Hua\udce9wei"), "not UTF-8"),
        (_read(H3C).replace('"120"', '"x"').replace('"121"', '"1e3"'), "ttl is '1e3'"),
        (_sonic(setter(("port", 0, "id"), [])), "ens1np0 neighbour has no port id"),
        (_sonic(setter(("chassis",), [])), "ens1np0 neighbour has no chassis id"),
        (_sonic(setter(("chassis", 0, "name"), [{"value": "A"}, {"value": "B"}])), "has 2 name entries"),
        (_sonic(setter(("chassis", 0, "mgmt-ip"), [{"value": 10}])), "mgmt-ip is 10"),
        (_sonic(setter(("port", 0, "id", 0, "type"), None)), "port id type is None"),
        (_sonic(setter(("name",), "")), "interface name is ''"),
    ],
)
def test_malformed_output_is_a_parse_error_naming_lldpctl(text: str, message: str) -> None:
    with pytest.raises(lldp.ParseError, match=rf"^lldpctl: .*({message})"):
        lldp.parse_lldpctl(text)


def test_non_string_input_is_a_parse_error() -> None:
    with pytest.raises(lldp.ParseError, match=r"^lldpctl: empty output"):
        lldp.parse_lldpctl(None)  # type: ignore[arg-type]
