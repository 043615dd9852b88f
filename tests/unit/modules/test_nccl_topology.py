"""gpufleet.node.nccl_topology and nccl_topology_check: exact calls, validated writes, stale files,
real fixture files and graph files."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import topology_xml
from ansible_collections.gpufleet.node.plugins.modules import nccl_topology, nccl_topology_check
from gpufleet_sim import faults_gpu, faults_rdma, faults_topo

from tests.unit.modules.simnode import SMI, SimNode, run_module, topology_node

QUERY = [SMI, "--query-gpu=index,uuid,pci.bus_id,compute_cap", "--format=csv,noheader"]
TOPO = [SMI, "topo", "-m"]
GRAPH = (
    '<graphs version="1">\n  <graph id="0" pattern="4">\n    <channel><gpu dev="0"/></channel>\n'
    "  </graph>\n</graphs>\n"
)
REAL = sorted(
    [
        "nccl-topo/ibm-cloud-h100-vsi-gx3d-8xh100-topo.xml",
        "nccl-topo/azhpc-images-ndv5-topo.xml",
        "nccl-topo/azhpc-images-ndv4-topo.xml",
        "nccl-topo/aws-ofi-nccl-p4d-24xl-topo.xml",
    ]
)


@pytest.fixture
def node(tmp_path: Path):
    with topology_node(tmp_path) as sim:
        yield sim


def test_writes_a_validated_topology_then_nothing(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "etc" / "nccl" / "topo.xml"
    result, warnings = run_module(nccl_topology.main, {"path": str(path)}, node, diff=True)
    assert node.calls == [QUERY, TOPO]
    assert warnings == []
    text = path.read_text()
    assert path.stat().st_mode & 0o777 == 0o644
    assert result["changes"] == [
        {"setting": "nccl_topology.file", "from": None, "to": topology_xml.digest(text)}
    ]
    assert result["sha256"] == topology_xml.digest(text) and (result["gpus"], result["nics"]) == (16, 8)
    assert result["diff"]["before"] == "" and result["diff"]["after"] == text
    assert 'modelid="207"' in text and "<graphs" not in text
    again, _ = run_module(nccl_topology.main, {"path": str(path)}, node)
    assert again["changed"] is False and again["changes"] == [] and again["differences"] == []


def test_a_stale_file_is_rewritten_and_what_differed_is_said(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    stale = faults_topo.stale_text(node.state())
    path.write_text(stale)
    result, _ = run_module(nccl_topology.main, {"path": str(path)}, node)
    assert result["changes"][0]["from"] == topology_xml.digest(stale)
    assert [d["kind"] for d in result["differences"]] == [
        "numa",
        "missing",
        "missing",
        "extra",
        "extra",
        "extra",
    ]
    assert (
        result["hints"][1]
        == f"{path} was stale: GPU 0000:c7:00.0 (NUMA 1) is on the node but not in the file"
    )
    assert path.read_text() != stale


def test_check_mode_writes_nothing(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    path.write_text(GRAPH)
    result, _ = run_module(nccl_topology.main, {"path": str(path)}, node, check_mode=True)
    assert result["changed"] is True and len(result["changes"]) == 1
    assert path.read_text() == GRAPH
    assert result["differences"][0]["kind"] == "unreadable"
    assert "NCCL graph file" in result["hints"][0]


def test_gdr_off(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    run_module(nccl_topology.main, {"path": str(path), "gdr": False}, node)
    assert 'gdr="1"' not in path.read_text() and path.read_text().count('gdr="0"') == 24


def test_a_bus_order_swap_leaves_the_file(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    run_module(nccl_topology.main, {"path": str(path)}, node)
    node.change(faults_gpu.bus_order_swapped)
    result, _ = run_module(nccl_topology.main, {"path": str(path)}, node)
    assert result["changed"] is False


def test_the_topology_is_never_rewritten_around_a_dead_port(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    run_module(nccl_topology.main, {"path": str(path)}, node)
    written = path.read_text()
    node.change(faults_rdma.link_down)
    checked, _ = run_module(nccl_topology.main, {"path": str(path)}, node, check_mode=True)
    assert checked["changes"] == [] and checked["changed"] is False
    assert checked["hints"][-1].startswith(f"{path} left as it is: not ACTIVE: mlx5_7")
    result, _ = run_module(nccl_topology.main, {"path": str(path)}, node)
    assert result["failed"] and "mlx5_7" in result["msg"] and "rdma_link.link_state" in result["msg"]
    assert path.read_text() == written


def check(node: SimNode, path: Path) -> dict:
    result, _ = run_module(nccl_topology_check.main, {"path": str(path)}, node)
    assert result["changed"] is False and result["changes"] == []
    return result


def test_check_passes_on_the_written_file(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    run_module(nccl_topology.main, {"path": str(path)}, node)
    node.calls.clear()
    result = check(node, path)
    assert node.calls == [QUERY, TOPO]
    assert result["matches"] is True and result["differences"] == []
    assert [(c["name"], c["ok"], c["value"], c["limit"]) for c in result["checks"]] == [
        ("nccl_topology.file", True, topology_xml.digest(path.read_text()), str(path)),
        ("nccl_topology.gpus", True, 16, 16),
        ("nccl_topology.nics", True, 8, 8),
        ("nccl_topology.unknown_devices", True, 0, 0),
    ]


def test_check_names_what_a_stale_file_gets_wrong(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    path.write_text(faults_topo.stale_text(node.state()))
    result = check(node, path)
    assert result["matches"] is False
    checks = {c["name"]: c for c in result["checks"]}
    assert (checks["nccl_topology.gpus"]["value"], checks["nccl_topology.gpus"]["ok"]) == (15, False)
    assert (
        checks["nccl_topology.gpus"]["message"]
        == "GPU 0000:c7:00.0 (NUMA 1) is on the node but not in the file"
    )
    assert (checks["nccl_topology.nics"]["value"], checks["nccl_topology.nics"]["limit"]) == (6, 8)
    assert checks["nccl_topology.unknown_devices"]["value"] == 3
    assert result["hints"] == [f"Rewrite {path} from the node: the gpufleet.node.nccl_topology role."]


def test_check_after_a_gpu_fell_off_the_bus(node: SimNode, tmp_path: Path) -> None:
    path = tmp_path / "topo.xml"
    run_module(nccl_topology.main, {"path": str(path)}, node)
    node.change(faults_gpu.gpu_missing)
    result = check(node, path)
    assert [d["message"] for d in result["differences"]] == [
        "GPU 0000:c7:00.0 in the file is not on this node"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no topology file at"),
        (GRAPH, "this is an NCCL graph file (<graphs>, the NCCL_GRAPH_FILE format), not a topology"),
        ("<system", "not well-formed XML"),
    ],
)
def test_check_refuses_what_is_not_a_topology(node: SimNode, tmp_path: Path, text, message) -> None:
    path = tmp_path / "topo.xml"
    if text is not None:
        path.write_text(text)
    result = check(node, path)
    assert result["matches"] is False
    assert [c["name"] for c in result["checks"]] == ["nccl_topology.file"]
    assert message in result["checks"][0]["message"]


@pytest.mark.parametrize("relpath", REAL)
def test_check_reads_every_real_file(node: SimNode, tmp_path: Path, read_fixture, relpath: str) -> None:
    path = tmp_path / "topo.xml"
    path.write_text(read_fixture(relpath))
    result = check(node, path)
    assert result["checks"][0] == {
        "name": "nccl_topology.file",
        "ok": True,
        "value": topology_xml.digest(read_fixture(relpath)),
        "limit": str(path),
        "unit": "",
        "message": "an NCCL topology",
    }
    assert result["matches"] is False and result["differences"]
