"""gpufleet.node.gpu_pinning: exact calls, files by UUID, refusal before writing, idempotence, check mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.modules import gpu_pinning
from gpufleet_sim import faults_gpu, state

from tests.unit.modules.simnode import SMI, SimNode, run_module

QUERY = [SMI, "--query-gpu=index,uuid,pci.bus_id,compute_cap", "--format=csv,noheader"]
TOPO = [SMI, "topo", "-m"]
INSTANCES = [{"name": "glm52", "nvlink_domain": 0}, {"name": "kimik3", "nvlink_domain": 1}]


@pytest.fixture
def node(tmp_path: Path) -> SimNode:
    return SimNode(tmp_path / "node")


def args(env_dir: Path, instances=INSTANCES) -> dict:
    return {"instances": instances, "env_dir": str(env_dir), "nccl_topo_file": "/etc/nccl/topo.xml"}


def domain_uuids(node: SimNode, domain: int) -> list[str]:
    gpus = sorted(node.state()["gpus"], key=lambda g: g["pci_bus_id"])
    return [g["uuid"] for g in gpus if g["nvlink_domain"] == domain and g.get("present", True)]


def test_writes_one_file_per_instance_then_nothing(node: SimNode, tmp_path: Path) -> None:
    env = tmp_path / "etc" / "gpufleet" / "instances"
    result, _ = run_module(gpu_pinning.main, args(env), node, diff=True)
    assert node.calls == [QUERY, TOPO]
    glm52 = ",".join(domain_uuids(node, 0))
    assert (env / "glm52.env").read_text() == (
        "# Managed by gpufleet (gpufleet.node.gpu_pinning); changes here are overwritten.\n"
        "# Instance glm52: NVLink domain 0; GPUs by UUID, in PCI bus order.\n"
        "CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
        f"CUDA_VISIBLE_DEVICES={glm52}\n"
        "NCCL_TOPO_FILE=/etc/nccl/topo.xml\n"
    )
    assert (env / "glm52.env").stat().st_mode & 0o777 == 0o644
    assert result["changes"] == [
        {
            "setting": f"gpu_pinning.instance[{name}]",
            "from": None,
            "to": {
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                "CUDA_VISIBLE_DEVICES": ",".join(domain_uuids(node, domain)),
                "NCCL_TOPO_FILE": "/etc/nccl/topo.xml",
            },
        }
        for name, domain in (("glm52", 0), ("kimik3", 1))
    ]
    assert [d["after_header"] for d in result["diff"]] == [str(env / "glm52.env"), str(env / "kimik3.env")]
    assert result["instances"]["kimik3"]["gpus"] == domain_uuids(node, 1)
    again, _ = run_module(gpu_pinning.main, args(env), node)
    assert again["changed"] is False and again["changes"] == []


def test_check_mode_writes_nothing(node: SimNode, tmp_path: Path) -> None:
    env = tmp_path / "instances"
    result, _ = run_module(gpu_pinning.main, args(env), node, check_mode=True)
    assert result["changed"] is True and len(result["changes"]) == 2
    assert not env.exists()


def test_an_edited_file_is_put_back(node: SimNode, tmp_path: Path) -> None:
    env = tmp_path / "instances"
    run_module(gpu_pinning.main, args(env), node)
    (env / "kimik3.env").write_text("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\nNCCL_GRAPH_FILE=/tmp/graph.xml\n")
    result, _ = run_module(gpu_pinning.main, args(env), node)
    assert result["changes"][0]["setting"] == "gpu_pinning.instance[kimik3]"
    assert result["changes"][0]["from"] == {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "NCCL_GRAPH_FILE": "/tmp/graph.xml",
    }
    assert "NCCL_GRAPH_FILE" not in (env / "kimik3.env").read_text()


def test_bus_order_swap_changes_nothing(node: SimNode, tmp_path: Path) -> None:
    env = tmp_path / "instances"
    run_module(gpu_pinning.main, args(env), node)
    files = {p.name: p.read_text() for p in env.iterdir()}
    before = [g["uuid"] for g in state.present_gpus(node.state())]
    node.change(faults_gpu.bus_order_swapped)
    assert [g["uuid"] for g in state.present_gpus(node.state())] != before
    result, _ = run_module(gpu_pinning.main, args(env), node)
    assert result["changed"] is False
    assert {p.name: p.read_text() for p in env.iterdir()} == files


def test_a_missing_gpu_is_refused_before_anything_is_written(node: SimNode, tmp_path: Path) -> None:
    node.change(faults_gpu.gpu_missing)
    env = tmp_path / "instances"
    result, _ = run_module(gpu_pinning.main, args(env), node)
    assert result["failed"] is True
    assert result["msg"] == (
        "Refusing to pin: instance kimik3 needs 8 GPUs on NVLink domain 1, which has 7 (1 missing); "
        "a GPU may have fallen off the bus (nvidia-smi -L, Xid 79 in dmesg). Nothing was written."
    )
    assert not env.exists()


def test_named_gpus_need_no_topology(node: SimNode, tmp_path: Path) -> None:
    chosen = domain_uuids(node, 1)[:2]
    result, _ = run_module(gpu_pinning.main, args(tmp_path, [{"name": "embed", "gpus": chosen[::-1]}]), node)
    assert node.calls == [QUERY]
    assert result["instances"]["embed"]["cuda_visible_devices"] == ",".join(chosen)


@pytest.mark.parametrize(
    "instances",
    [
        [{"name": "a", "nvlink_domain": 0}, {"name": "a", "nvlink_domain": 1}],
        [{"name": "../etc/passwd", "nvlink_domain": 0}],
    ],
)
def test_bad_names_are_refused(node: SimNode, tmp_path: Path, instances) -> None:
    result, _ = run_module(gpu_pinning.main, args(tmp_path, instances), node)
    assert result["failed"] and "instance names must be unique" in result["msg"]
    assert node.calls == []


def test_domain_and_gpus_are_mutually_exclusive(node: SimNode, tmp_path: Path) -> None:
    result, _ = run_module(
        gpu_pinning.main, args(tmp_path, [{"name": "x", "nvlink_domain": 0, "gpus": ["GPU-1"]}]), node
    )
    assert result["failed"] and "mutually exclusive" in result["msg"]
