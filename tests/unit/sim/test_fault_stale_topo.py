"""The stale-nccl-topo fault: a topology file from before a hardware change in the node's /etc."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpufleet_sim import build, faults, state, sysfs


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    node_state = build.build_node_state("node01", "b300-16", 1)
    state.save(tmp_path, node_state)
    sysfs.render(tmp_path / "sys", node_state)
    (tmp_path / "etc-upper").mkdir()
    return tmp_path


def topo(node_dir: Path) -> Path:
    return node_dir / "etc-upper" / "nccl" / "topo.xml"


def test_injects_a_stale_file_and_clears_it_away(node_dir: Path) -> None:
    assert faults.inject(node_dir, "stale-nccl-topo") is True
    text = topo(node_dir).read_text()
    assert text.startswith('<system version="1">\n  <cpu numaid="0"')
    last_gpu = state.present_gpus(state.load(node_dir))[-1]["pci_bus_id"]  # 00000000:C7:00.0
    assert 'busid="0000:d7:00.0"' in text and 'busid="0000:c7:00.0"' not in text
    assert 'name="mlx5_7"' not in text
    assert last_gpu == "00000000:C7:00.0"
    assert faults.clear(node_dir, "stale-nccl-topo") == ["stale-nccl-topo"]
    assert not topo(node_dir).exists()


def test_clearing_puts_back_the_file_that_was_there(node_dir: Path) -> None:
    topo(node_dir).parent.mkdir(parents=True)
    topo(node_dir).write_text('<system version="1"/>\n')
    inode = topo(node_dir).stat().st_ino
    faults.inject(node_dir, "stale-nccl-topo")
    # rewritten in place: a mounted overlay keeps showing the same upper-dir inode
    assert topo(node_dir).stat().st_ino == inode
    assert "mlx5_0" in topo(node_dir).read_text()
    faults.clear(node_dir)
    assert topo(node_dir).read_text() == '<system version="1"/>\n'
