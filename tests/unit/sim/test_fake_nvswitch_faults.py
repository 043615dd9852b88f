"""The simulated NVSwitch fabric faults (issue 38 item 2, sim/faults_nvswitch.py): nvlink-crc-storm,
fabric-manager-fault and sxid, each read back in the real formats with the parsers the node's modules
use (nvlink, gpu_health_readings, xid, nvidia_smi.parse_query_csv) and judged by node_health."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import (
    gpu_health_readings,
    nvidia_smi,
    nvlink,
    xid,
)
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health
from gpufleet_sim import boot, faults, faults_health, faults_nvswitch, state, thermal
from gpufleet_sim.tools import dmesg

from tests.unit.sim.fake_node import build_nodes, node_fixture, run, smi


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_nodes(tmp_path_factory, ("b300-16",))


b300 = node_fixture("b300-16", "built")


def errors(node_dir: Path) -> dict[str, dict[str, Any]]:
    totals = nvlink.error_totals(nvlink.parse_error_counters(smi(node_dir, "nvlink", "-e")))
    return {g["uuid"]: g for g in totals}


def health(node_dir: Path) -> list[dict[str, Any]]:
    return gpu_health_readings.parse_health_xml(smi(node_dir, "-q", "-x"))


def _storm_began(node_dir: Path, seconds: float) -> None:
    """The storm's last read was ``seconds`` earlier than it was."""
    with state.locked(node_dir) as current:
        for gpu in current["gpus"]:
            storm = gpu["nvlink"].get("crc_storm")
            if storm:
                storm["t"] -= seconds


def test_nvlink_crc_storm_rises_on_one_link_of_gpu_9_fastest_under_load(b300: Path) -> None:
    gpu9 = state.present_gpus(state.load(b300))[9]["uuid"]
    assert {g["crc"] for g in errors(b300).values()} == {0}
    faults.inject(b300, "nvlink-crc-storm")
    _storm_began(b300, 4.0)  # 4 s at idle
    idle = errors(b300)
    assert 6000 <= idle[gpu9]["crc"] < 6100 and {g["crc"] for u, g in idle.items() if u != gpu9} == {0}
    assert {(g["replay"], g["recovery"]) for g in idle.values()} == {(0, 0)}
    (report,) = nvlink.parse_error_counters(smi(b300, "nvlink", "-e", "-i", "9"))
    crc = {link["link"]: link["counters"]["crc"] for link in report["links"]}
    assert [n for n, count in crc.items() if count] == [4]
    # 4 s more with GPU 9 busy (a load that began a minute ago): more than twice the idle rise
    with state.locked(b300) as current:
        thermal.change_load(current, [gpu9], 3, time.time() - 60.0)
    _storm_began(b300, 4.0)
    loaded = errors(b300)
    assert loaded[gpu9]["crc"] - idle[gpu9]["crc"] > 2 * 6000
    failed = [
        c
        for c in node_health.nvlink_error_checks(
            list(idle.values()), list(loaded.values()), 4.0, "under load"
        )
        if not c["ok"]
    ]
    assert [(c["name"], c["limit"], c["unit"]) for c in failed] == [
        (f"health.nvlink_errors[{gpu9}]", 6000, "CRC errors")
    ]
    # the clear stops the rise; what was counted stays
    faults.clear(b300, "nvlink-crc-storm")
    kept = errors(b300)[gpu9]["crc"]
    assert kept >= loaded[gpu9]["crc"]
    _storm_began(b300, 10.0)
    assert errors(b300)[gpu9]["crc"] == kept


def test_fabric_manager_fault_leaves_one_baseboards_gpus_in_progress_in_every_format(b300: Path) -> None:
    gpus = state.present_gpus(state.load(b300))
    board = [g["uuid"] for g in gpus if g["nvlink_domain"] == gpus[0]["nvlink_domain"]]
    assert len(board) == 8
    before = health(b300)
    assert {tuple(g["fabric"].values()) for g in before} == {("Completed", "Success")}
    assert all(c["ok"] for c in node_health.judge({"gpus": before}) if "fabric_manager" in c["name"])
    faults.inject(b300, "fabric-manager-fault")
    failed = [c for c in node_health.judge({"gpus": health(b300)}) if not c["ok"]]
    assert sorted(c["name"] for c in failed) == sorted(f"health.fabric_manager[{u}]" for u in board)
    assert {(c["value"], c["limit"]) for c in failed} == {("In Progress/N/A", "Completed/Success")}
    fields = ["uuid", "fabric.state", "fabric.status"]
    rows = nvidia_smi.parse_query_csv(
        smi(b300, "--query-gpu=" + ",".join(fields), "--format=csv,noheader"), fields=fields
    )
    assert {
        r["uuid"] for r in rows if r["fabric.state"] == "In Progress" and r["fabric.status"] is None
    } == set(board)
    text = smi(b300, "-q", "-i", "0")
    assert re.search(r"^    Fabric\n        State +: In Progress\n        Status +: N/A$", text, re.M), text
    faults.clear(b300, "fabric-manager-fault")
    assert health(b300) == before


def test_an_sxid_is_logged_in_the_real_lines_and_blocks_until_a_reboot(b300: Path) -> None:
    faults.inject(b300, "sxid")
    rc, out, _ = run(dmesg, b300)
    assert rc == 0
    sxids = xid.parse_kernel_events(out)["sxids"]
    assert [(e["device"], e["pci_bus_id"], e["sxid"], e["severity"]) for e in sxids] == [
        ("nvidia-nvswitch0", "0000:05:00.0", 20034, "fatal"),
        ("nvidia-nvswitch0", "0000:05:00.0", 20034, None),
        ("nvidia-nvswitch0", "0000:05:00.0", 20034, None),
    ]
    assert sxids[0]["message"] == "Link 62 LTSSM Fault Up"
    (c,) = node_health.sxid_checks(sxids)
    assert (c["name"], c["ok"], c["value"]) == ("health.sxid[0000:05:00.0]", False, 20034)
    faults.clear(b300, "sxid")
    assert xid.parse_kernel_events(run(dmesg, b300)[1])["sxids"] == sxids  # a log keeps its history
    with state.locked(b300) as current:
        boot.power_cycle(current, b300 / "sys")
    assert xid.parse_kernel_events(run(dmesg, b300)[1])["sxids"] == []


def test_the_nvswitch_faults_are_registered_and_undone_by_their_clears(b300: Path) -> None:
    assert set(faults_nvswitch.FAULTS) == {"nvlink-crc-storm", "fabric-manager-fault", "sxid"}
    assert set(faults_nvswitch.FAULTS) <= set(faults_health.FAULTS) <= set(faults.FAULTS)
    before = (health(b300), smi(b300, "nvlink", "-s"))
    for name in faults_nvswitch.FAULTS:
        assert faults.inject(b300, name)
    assert faults.clear(b300) == list(faults_nvswitch.FAULTS)
    assert (health(b300), smi(b300, "nvlink", "-s")) == before
    assert not state.load(b300).get("fault_saved")
