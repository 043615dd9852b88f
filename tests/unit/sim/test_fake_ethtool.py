"""The simulated `ethtool -a/-A` (global pause): read back with the parser rdma_qos uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_parse
from gpufleet_sim import build, state
from gpufleet_sim.tools import ethtool


@pytest.fixture
def node(tmp_path: Path) -> Path:
    state.save(tmp_path, build.build_node_state("b300-node-0", "b300-16", 0))
    return tmp_path


def show(node: Path, capsys: pytest.CaptureFixture[str], netdev: str = "ens21np0") -> dict[str, bool]:
    assert ethtool.main(["-a", netdev], node) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Pause parameters for {netdev}:\nAutonegotiate:\toff\nRX:\t\t")
    pause: dict[str, bool] = rdma_parse.parse_ethtool_pause(out)
    return pause


def test_tuned_node_has_global_pause_off(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert show(node, capsys) == {"autoneg": False, "rx": False, "tx": False}


def test_set_and_show(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ethtool.main(["-A", "ens21np0", "rx", "on", "tx", "on"], node) == 0
    assert capsys.readouterr().out == ""
    assert show(node, capsys) == {"autoneg": False, "rx": True, "tx": True}
    assert ethtool.main(["--pause", "ens21np0", "tx", "off"], node) == 0
    assert show(node, capsys) == {"autoneg": False, "rx": True, "tx": False}
    assert show(node, capsys, "ens38np0")["rx"] is False  # one port only


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-a", "eth9"], "netlink error: no device matches name"),
        (["-A", "eth9", "rx", "off"], "netlink error: no device matches name"),
        (["-A", "ens21np0", "autoneg", "on"], "netlink error: Invalid argument"),
        (["-A", "ens21np0", "rx"], "bad command line argument"),
        (["-A", "ens21np0", "rx", "maybe"], "bad command line argument"),
        (["-i", "ens21np0"], "only shows and sets pause"),
    ],
)
def test_errors(node: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert ethtool.main(argv, node) == 1
    assert message in capsys.readouterr().err
