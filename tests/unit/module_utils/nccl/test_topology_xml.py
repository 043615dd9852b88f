"""topology_xml: NCCL topology XML parsed from every real file, built from a node's sysfs, compared."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.nccl import topology_xml
from gpufleet_sim import build, faults_gpu, faults_topo, state, sysfs
from gpufleet_sim.tools import nvsmi_topo

REAL = {
    "nccl-topo/ibm-cloud-h100-vsi-gx3d-8xh100-topo.xml": {"cpus": 2, "gpus": 8, "nics": 8, "nets": 8},
    "nccl-topo/azhpc-images-ndv5-topo.xml": {"cpus": 2, "gpus": 8, "nics": 8, "nets": 0},
    "nccl-topo/azhpc-images-ndv4-topo.xml": {"cpus": 4, "gpus": 8, "nics": 8, "nets": 0},
    "nccl-topo/aws-ofi-nccl-p4d-24xl-topo.xml": {"cpus": 2, "gpus": 8, "nics": 4, "nets": 0},
}
CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n\nprocessor\t: 1\n"
GRAPH = """<graphs version="1">
  <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="40" speedinter="40" typeintra="NVL">
    <channel><gpu dev="0"/><gpu dev="1"/></channel>
  </graph>
</graphs>
"""


def test_every_real_capture_in_the_fixtures_is_covered(fixtures_dir: Path) -> None:
    found = sorted(str(p.relative_to(fixtures_dir)) for p in (fixtures_dir / "nccl-topo").glob("*.xml"))
    assert found == sorted(REAL)


@pytest.mark.parametrize(("relpath", "shape"), sorted(REAL.items()))
def test_parses_every_real_topology(read_fixture, relpath: str, shape: dict[str, int]) -> None:
    parsed = topology_xml.parse(read_fixture(relpath))
    kinds = [d["kind"] for d in parsed["devices"].values()]
    assert len(parsed["cpus"]) == shape["cpus"]
    assert kinds.count("gpu") == shape["gpus"]
    assert kinds.count("nic") == shape["nics"]
    assert len(parsed["nets"]) == shape["nets"]


def test_ibm_dump_details(read_fixture) -> None:
    parsed = topology_xml.parse(read_fixture("nccl-topo/ibm-cloud-h100-vsi-gx3d-8xh100-topo.xml"))
    assert parsed["cpus"]["1"] == {
        "affinity": "ffffffff,ffffffff,ffff0000,00000000,00000000",
        "arch": "x86_64",
        "vendor": "GenuineIntel",
        "familyid": 6,
        "modelid": 143,
    }
    gpu = parsed["devices"]["0000:a4:00.0"]
    assert (gpu["kind"], gpu["numaid"], gpu["parent"]) == ("gpu", "0", "0000:a1:00.0")
    assert gpu["gpu"]["sm"] == 90 and len(gpu["gpu"]["nvlinks"]) == 4
    assert {link["tclass"] for link in gpu["gpu"]["nvlinks"]} == {"0x068000"}
    assert parsed["nets"]["mlx5_7"] == {"busid": "0000:a3:00.0", "speed": 200000, "port": 1}
    assert parsed["devices"]["0000:a1:00.0"]["kind"] == "bridge"


def test_the_dumps_guid_is_the_node_guid_byte_swapped() -> None:
    # mlx5_7 of the IBM dump: 0x34f4e30003e1a258 is node GUID 58a2:e103:00e3:f434 (Mellanox OUI 58a2e1)
    assert topology_xml.net_guid("58a2:e103:00e3:f434") == "0x34f4e30003e1a258"
    assert topology_xml.net_guid("58a2:e103:00e3:f804") == "0x4f8e30003e1a258"
    assert topology_xml.net_guid("not a guid") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GRAPH, "NCCL graph file (<graphs>, the NCCL_GRAPH_FILE format)"),
        ("<nvidia_smi_log/>", "root element is <nvidia_smi_log>"),
        ('<system version="2"><cpu numaid="0"/></system>', "NCCL reads version 1"),
        ('<system version="1"/>', "no <cpu> element"),
        ('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"', "not well-formed"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><system version="1"/>', "DOCTYPE or entity"),
        ("", "empty"),
        (
            '<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"/><pci busid="0000:01:00.0"/></cpu>'
            "</system>",
            "appears twice",
        ),
    ],
)
def test_refuses_what_is_not_a_topology(text: str, message: str) -> None:
    with pytest.raises(topology_xml.TopologyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        topology_xml.parse(text)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("00000000:A4:00.0", "0000:a4:00.0"),
        ("0000:a4:00.0", "0000:a4:00.0"),
        ("0001:00:00.0", "0001:00:00.0"),
        ("ffff:ff:01.0", "ffff:ff:01.0"),
    ],
)
def test_bus_ids_are_written_as_nccl_does(given: str, expected: str) -> None:
    assert topology_xml.normalize_bus_id(given) == expected


@pytest.mark.parametrize(
    ("cpulist", "width", "mask"),
    [
        ("0-79", 160, "00000000,00000000,0000ffff,ffffffff,ffffffff"),  # the IBM dump's CPU 0
        ("80-159", 160, "ffffffff,ffffffff,ffff0000,00000000,00000000"),
        ("0-55,112-167", 224, "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff"),
        ("0", 1, "00000001"),
    ],
)
def test_cpumask_has_the_kernels_cpumap_format(cpulist: str, width: int, mask: str) -> None:
    assert topology_xml.cpumask(topology_xml.parse_cpulist(cpulist), width) == mask


def test_values() -> None:
    assert topology_xml.parse_cpuinfo(CPUINFO) == {"vendor": "GenuineIntel", "familyid": 6, "modelid": 207}
    assert topology_xml.rate_mbps("400 Gb/sec (4X NDR)") == 400000
    assert topology_xml.rate_mbps("") is None
    assert topology_xml.sm_from_compute_cap("10.3") == 103
    assert [topology_xml.nccl_arch(m) for m in ("x86_64", "aarch64", "ppc64le")] == [
        "x86_64",
        "arm64",
        "ppc64",
    ]
    with pytest.raises(topology_xml.TopologyError):
        topology_xml.sm_from_compute_cap("N/A")


def test_nvlinks_switched_board_and_direct_pairs() -> None:
    gpus = {f"GPU{i}": {"busid": f"0000:0{i}:00.0", "sm": 90, "class": "0x030200"} for i in range(3)}
    switched = {a: {b: ("X" if a == b else "NV18") for b in gpus} for a in gpus}
    edges = topology_xml.nvlinks_from_matrix(switched, gpus)
    assert edges["0000:00:00.0"] == [{"target": "fffffff:ffff:ff", "count": 18, "tclass": "0x068000"}]
    bridged = {"GPU0": {"GPU1": "NV4", "GPU2": "SYS"}, "GPU1": {"GPU0": "NV4"}, "GPU2": {"GPU0": "SYS"}}
    edges = topology_xml.nvlinks_from_matrix(bridged, gpus)
    assert edges["0000:00:00.0"] == [{"target": "0000:01:00.0", "count": 4, "tclass": "0x030200"}]
    assert edges["0000:02:00.0"] == []


def sim_node(tmp_path: Path, profile: str = "b300-16") -> tuple[Path, dict]:
    node_state = build.build_node_state("node01", profile, 1)
    state.save(tmp_path, node_state)
    sysfs.render(tmp_path / "sys", node_state)
    return tmp_path, node_state


def live(node_dir: Path) -> tuple[dict, str, dict, list[str]]:
    node_state = state.load(node_dir)
    present = state.present_gpus(node_state)
    gpus = [
        {"index": i, "pci_bus_id": g["pci_bus_id"], "compute_cap": g["compute_cap"]}
        for i, g in enumerate(present)
    ]
    matrix = nvidia_smi.parse_topo_matrix(nvsmi_topo.render(node_state, present))["matrix"]
    system, bus_ids, _ = topology_xml.read_node(
        str(node_dir / "sys"), CPUINFO, platform.machine(), gpus, matrix, gdr=True
    )
    text = topology_xml.render(system)
    return system, text, topology_xml.parse(text), bus_ids


def test_a_sim_node_renders_as_nccl_would_dump_it(tmp_path: Path) -> None:
    node_dir, _ = sim_node(tmp_path)
    system, text, parsed, bus_ids = live(node_dir)
    assert text.startswith(topology_xml.HEADER + '\n<system version="1">\n  <cpu numaid="0" affinity="')
    assert "host_hash" not in text and "graph" not in text.lower()
    kinds = [d["kind"] for d in parsed["devices"].values()]
    assert (kinds.count("gpu"), kinds.count("nic"), kinds.count("bridge")) == (16, 8, 8)
    # endpoints hang off the switch upstream port; the downstream ports are folded away, as NCCL does
    assert parsed["devices"]["0000:13:00.0"]["parent"] == "0000:11:00.0"
    assert parsed["devices"]["0000:11:00.0"]["parent"] is None
    assert "0000:12:00.0" not in parsed["devices"] and "0000:12:00.0" in bus_ids
    assert parsed["devices"]["0000:93:00.0"]["numaid"] == "1"
    assert parsed["nets"]["mlx5_0"] == {"busid": "0000:15:00.0", "speed": 400000, "port": 1}
    line = next(x for x in text.splitlines() if 'busid="0000:13:00.0"' in x)
    assert line.strip() == (
        '<pci busid="0000:13:00.0" class="0x030200" vendor="0x10de" device="0x3182" '
        'subsystem_vendor="0x10de" subsystem_device="0x20e6" link_speed="32.0 GT/s PCIe" link_width="16">'
    )
    assert '<gpu dev="0" sm="103" rank="0" gdr="1">' in text
    assert text.count('<nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>') == 16
    assert topology_xml.compare(parsed, parsed, bus_ids) == []
    cpu0 = system["cpus"][0]
    assert (cpu0["vendor"], cpu0["familyid"], cpu0["modelid"]) == ("GenuineIntel", 6, 207)


def test_render_is_deterministic_and_survives_a_bus_order_swap(tmp_path: Path) -> None:
    node_dir, _ = sim_node(tmp_path)
    _, before, _, _ = live(node_dir)
    assert live(node_dir)[1] == before
    with state.locked(node_dir) as node:
        faults_gpu.bus_order_swapped(node, node_dir / "sys")
    # the swap moves GPUs between bus IDs; what sits at each bus ID is the same kind of GPU
    assert live(node_dir)[1] == before


def test_a_stale_file_is_reported_with_what_differs(tmp_path: Path) -> None:
    node_dir, node_state = sim_node(tmp_path)
    _, _, parsed, bus_ids = live(node_dir)
    stale = topology_xml.parse(faults_topo.stale_text(node_state))
    assert [(d["kind"], d["busid"]) for d in topology_xml.compare(stale, parsed, bus_ids)] == [
        ("numa", "0000:15:00.0"),
        ("missing", "0000:c7:00.0"),
        ("missing", "0000:c8:00.0"),
        ("extra", "0000:10:00.0"),
        ("extra", "0000:90:00.0"),
        ("extra", "0000:d7:00.0"),
    ]


def test_a_node_with_a_gpu_off_the_bus(tmp_path: Path) -> None:
    node_dir, _ = sim_node(tmp_path)
    _, _, full, _ = live(node_dir)
    with state.locked(node_dir) as node:
        faults_gpu.gpu_missing(node, node_dir / "sys")
    _, _, parsed, bus_ids = live(node_dir)
    # the old file names a GPU the node no longer has
    assert [d["message"] for d in topology_xml.compare(full, parsed, bus_ids)] == [
        "GPU 0000:c7:00.0 in the file is not on this node"
    ]


@pytest.mark.parametrize("relpath", sorted(REAL))
def test_real_files_compare_against_a_node_without_error(read_fixture, tmp_path: Path, relpath: str) -> None:
    node_dir, _ = sim_node(tmp_path, "h100-8")
    _, _, parsed, bus_ids = live(node_dir)
    differences = topology_xml.compare(topology_xml.parse(read_fixture(relpath)), parsed, bus_ids)
    # another machine entirely: most GPUs and NICs of this node are missing, theirs are extra
    assert sum(d["kind"] == "missing" for d in differences) >= 12
    assert any(d["kind"] == "extra" for d in differences)
    assert all(d["message"] for d in differences)


def test_a_down_port_leaves_its_speed_to_nccl(tmp_path: Path) -> None:
    node_dir, node_state = sim_node(tmp_path)
    from gpufleet_sim import sysfs_rdma

    sysfs_rdma.set_link(node_state, node_state["nics"][0], node_dir / "sys", False)
    state.save(node_dir, node_state)
    present = state.present_gpus(node_state)
    gpus = [{"index": i, "pci_bus_id": g["pci_bus_id"], "compute_cap": "10.3"} for i, g in enumerate(present)]
    system, _, warnings = topology_xml.read_node(str(node_dir / "sys"), CPUINFO, "x86_64", gpus, None)
    parsed = topology_xml.parse(topology_xml.render(system))
    assert parsed["nets"]["mlx5_0"]["speed"] is None
    assert warnings == [
        "RDMA device mlx5_0 port 1 is not ACTIVE; its speed is left out of the topology so NCCL probes it"
    ]
