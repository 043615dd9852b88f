"""The simulator's node model: profiles, the sysfs PCI tree, GPU faults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpufleet_sim import build, faults, state, sysfs


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    node_state = build.build_node_state("node07", "b300-16", 7)
    state.save(tmp_path, node_state)
    sysfs.render(tmp_path / "sys", node_state)
    return tmp_path


@pytest.mark.parametrize(
    ("profile", "gpus", "nics", "domains"),
    [("b300-16", 16, 8, {0: 8, 1: 8}), ("h100-8", 8, 8, {0: 8})],
)
def test_profiles_shape(profile: str, gpus: int, nics: int, domains: dict[int, int]) -> None:
    node = build.build_node_state("n", profile, 1)
    assert len(node["gpus"]) == gpus and len(node["nics"]) == nics
    counts: dict[int, int] = {}
    for gpu in node["gpus"]:
        counts[gpu["nvlink_domain"]] = counts.get(gpu["nvlink_domain"], 0) + 1
    assert counts == domains
    assert len({g["uuid"] for g in node["gpus"]}) == gpus
    # each b300 NVLink baseboard hangs off one socket
    for domain in domains if len(domains) > 1 else []:
        assert len({g["numa_node"] for g in node["gpus"] if g["nvlink_domain"] == domain}) == 1


def test_uuids_are_stable_per_node_and_differ_across_nodes() -> None:
    a1 = build.build_node_state("node01", "b300-16", 1)
    a2 = build.build_node_state("node01", "b300-16", 1)
    b = build.build_node_state("node02", "b300-16", 2)
    assert [g["uuid"] for g in a1["gpus"]] == [g["uuid"] for g in a2["gpus"]]
    assert not {g["uuid"] for g in a1["gpus"]} & {g["uuid"] for g in b["gpus"]}


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile 'a100'; choose one of: b300-16, h100-8, h200"):
        build.load_profile("a100")


def test_pci_tree_walks_like_linux(node_dir: Path) -> None:
    sys_root = node_dir / "sys"
    gpu = state.load(node_dir)["gpus"][0]
    link = sys_root / "bus" / "pci" / "devices" / state.sysfs_bdf(gpu["pci_bus_id"])
    real = Path(os.path.realpath(link))
    # endpoint <- downstream port <- switch upstream <- root port <- host bridge
    chain = [p.name for p in [real, *real.parents][:5]]
    assert chain == ["0000:13:00.0", "0000:12:00.0", "0000:11:00.0", "0000:10:01.0", "pci0000:10"]
    assert (real / "class").read_text() == "0x030200\n"
    assert (real / "vendor").read_text() == "0x10de\n"
    assert (real / "numa_node").read_text() == "0\n"
    assert (real / "local_cpulist").read_text() == "0-55,112-167\n"
    assert (real / "max_link_speed").read_text() == "64.0 GT/s PCIe\n"
    upstream = real.parent.parent
    assert (upstream / "class").read_text() == "0x060400\n"


def test_cpumask_matches_cpulist() -> None:
    assert sysfs._cpumask("0-3") == "0000000f"
    assert sysfs._cpumask("0,32") == "00000001,00000001"


def test_power_capped_drops_enforced_limit_by_300_w(node_dir: Path) -> None:
    assert faults.inject(node_dir, "power-capped") is True
    assert faults.inject(node_dir, "power-capped") is False
    node = state.load(node_dir)
    assert {g["power"]["enforced_limit_w"] for g in node["gpus"]} == {1100.0}
    assert {g["power"]["requested_limit_w"] for g in node["gpus"]} == {1400.0}
    assert faults.clear(node_dir, "power-capped") == ["power-capped"]
    assert {g["power"]["enforced_limit_w"] for g in state.load(node_dir)["gpus"]} == {1400.0}


def test_bus_order_swap_keeps_uuid_with_physical_gpu(node_dir: Path) -> None:
    def view() -> list[tuple[str, str, int]]:
        gpus = state.present_gpus(state.load(node_dir))
        return [(g["uuid"], g["pci_bus_id"], g["nvlink_domain"]) for g in gpus]

    before = view()
    faults.inject(node_dir, "bus-order-swapped")
    after = view()
    # indices 7 and 8 (either side of the baseboard boundary) now hold each other's GPU
    assert [b for _, b, _ in after] == [b for _, b, _ in before]
    assert after[7][0] == before[8][0] and after[8][0] == before[7][0]
    assert after[:7] == before[:7] and after[9:] == before[9:]
    # UUIDs follow the physical GPU, so each NVLink domain keeps the same GPUs in the same order
    for domain in (0, 1):
        assert [u for u, _, d in after if d == domain] == [u for u, _, d in before if d == domain]
    faults.clear(node_dir)
    assert view() == before


def test_gpu_missing_leaves_the_bus_and_comes_back(node_dir: Path) -> None:
    node = state.load(node_dir)
    last = state.present_gpus(node)[-1]
    link = node_dir / "sys" / "bus" / "pci" / "devices" / state.sysfs_bdf(last["pci_bus_id"])
    faults.inject(node_dir, "gpu-missing")
    assert len(state.present_gpus(state.load(node_dir))) == 15
    assert not link.exists()
    faults.clear(node_dir, "gpu-missing")
    assert len(state.present_gpus(state.load(node_dir))) == 16
    assert (link / "numa_node").read_text() == "1\n"


def test_unknown_fault_names_the_choices(node_dir: Path) -> None:
    with pytest.raises(faults.FaultError, match=r"unknown fault .melted.; choose one of: .*power-capped"):
        faults.inject(node_dir, "melted")


def test_a_locked_change_is_written_and_an_unchanged_state_is_left_as_it_was(node_dir: Path) -> None:
    path = node_dir / state.STATE_FILE
    with state.locked(node_dir) as node:
        node["gpus"][3]["enforced_limit_w"] = 1100
    assert state.load(node_dir)["gpus"][3]["enforced_limit_w"] == 1100
    written = path.stat().st_mtime_ns
    os.utime(path, ns=(written - 10**9, written - 10**9))  # a second older: a write would move it
    with state.locked(node_dir) as node:
        assert node["gpus"][3]["enforced_limit_w"] == 1100
    assert path.stat().st_mtime_ns == written - 10**9
    assert not path.with_name(path.name + ".tmp").exists()
    with state.locked(node_dir) as node:
        node["gpus"][3]["enforced_limit_w"] = 1400
    assert (
        path.stat().st_mtime_ns > written - 10**9
        and state.load(node_dir)["gpus"][3]["enforced_limit_w"] == 1400
    )
