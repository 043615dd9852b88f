"""The simulated `lldpctl -f json0|json`: the fleet's cabling as lldpd reports it, read back with the
parser gpufleet uses on real nodes (module_utils/fabric/lldp.py, tested on the real captures first),
in the shape of Debian's lldpd 1.0.16 (its captures in tests/fixtures/real/lldp)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.fabric import lldp
from gpufleet_sim import build, state
from gpufleet_sim.tools import lldpctl

from tests.json_shape import key_paths
from tests.unit.mutations import FIXTURES


@pytest.fixture
def node(tmp_path: Path) -> Path:
    state.save(tmp_path, build.build_node_state("node03", "b300-16", 3))
    return tmp_path


def run(node: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert lldpctl.main(list(argv), node) == 0
    out: str = capsys.readouterr().out
    return out


@pytest.mark.parametrize("fmt", ["json0", "json"])
def test_each_roce_port_hears_its_leaf_port(node: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    nics = state.load(node)["nics"]
    found = lldp.parse_lldpctl(run(node, capsys, "-f", fmt))
    assert list(found) == [n["netdev"] for n in nics]
    seen = {i: (n[0]["chassis_name"], n[0]["port_id"], n[0]["port_id_type"]) for i, n in found.items()}
    half = len(nics) // 2
    # node03: the third node's ports, four on each leaf
    assert seen[nics[0]["netdev"]] == ("leaf01", f"swp{2 * half + 1}", "ifname")
    assert seen[nics[half - 1]["netdev"]] == ("leaf01", f"swp{3 * half}", "ifname")
    assert seen[nics[half]["netdev"]] == ("leaf02", f"swp{2 * half + 1}", "ifname")
    neighbour = found[nics[-1]["netdev"]][0]
    # a Cumulus leaf's lldpd sends no maximum frame size (neither did the real one captured)
    assert neighbour["mgmt_ip"] == ["192.0.2.2"] and neighbour["mfs"] is None


@pytest.mark.parametrize("fmt", ["json0", "json"])
def test_the_output_has_the_keys_real_lldpd_1_0_16_prints(
    node: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    real = json.loads((FIXTURES / "lldp" / f"debian-lldpd-1.0.16-lldpctl-{fmt}.json").read_text())
    fake = json.loads(run(node, capsys, "-f", fmt))
    if fmt == "json":
        # -f json keys interfaces and chassis by name: the same names on both sides first
        real, fake = _renamed(real), _renamed(fake)
    assert key_paths(fake) == key_paths(real)


def _renamed(document: dict[str, Any]) -> list[dict[str, Any]]:
    """-f json's interfaces with their own and their chassis's names replaced by ``IFACE``, ``NAME``."""
    return [
        {"IFACE": {**body, "chassis": {"NAME": next(iter(body["chassis"].values()))}}}
        for keyed in document["lldp"]["interface"]
        for body in keyed.values()
    ]


def test_v_prints_the_version_and_nothing_else(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # lldpcli exits at -v, whatever comes with it
    assert run(node, capsys, "-f", "json0", "-v") == "1.0.16\n"


def test_interface_names_limit_the_output_and_one_interface_is_an_object_in_json(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netdev = state.load(node)["nics"][2]["netdev"]
    out = run(node, capsys, "-f", "json", netdev)
    assert isinstance(json.loads(out)["lldp"]["interface"], dict)  # lldpd's shape for one interface
    assert list(lldp.parse_lldpctl(out)) == [netdev]


def test_a_port_without_link_or_neighbour_hears_nothing(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with state.locked(node) as data:
        data["nics"][0]["link_up"] = False
        data["nics"][1]["neighbor"] = None
        gone = [data["nics"][0]["netdev"], data["nics"][1]["netdev"]]
    found = lldp.parse_lldpctl(run(node, capsys, "-f", "json0"))
    assert not set(gone) & set(found) and len(found) == len(state.load(node)["nics"]) - 2
    assert lldp.parse_lldpctl(run(node, capsys, "-f", "json0", gone[0])) == {}
    assert lldp.parse_lldpctl(run(node, capsys, "-f", "json", gone[0])) == {}


def test_an_unknown_format_is_refused(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lldpctl.main(["-f", "xml"], node) == 1
    assert "unknown output format" in capsys.readouterr().err
