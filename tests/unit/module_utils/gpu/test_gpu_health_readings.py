"""gpu_health_readings: PCIe, replay, row remap, ECC and retired pages from real `nvidia-smi -q -x`."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import gpu_health_readings, nvidia_smi

from tests.unit.mutations import read_capture

H200_IDLE = "h200-device/nvidia-smi-q-x-idle.xml"
BLACKWELL = "nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml"
A100_V12 = "nvidia-smi-xml/telegraf-a100-sxm4-v12.xml"
A100_MIG = "nvidia-smi-xml/netdata-a100-sxm4-mig.xml"


def test_real_h200_idle_reads_every_health_field() -> None:
    (gpu,) = gpu_health_readings.parse_health_xml(read_capture(H200_IDLE))
    assert (
        gpu["uuid"] == "GPU-2e6e9300-13a8-2712-b2c8-503aade81b40" and gpu["pci_bus_id"] == "00000000:00:06.0"
    )
    assert gpu["pcie"] == {
        "gen_current": 5,
        "gen_max": 5,
        "gen_device_max": 5,
        "gen_host_max": None,  # N/A on this machine: not supported, not zero
        "width_current": 16,
        "width_max": 16,
        "replay_counter": 0,
        "replay_rollover_counter": 0,
    }
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert gpu["ecc"]["enabled"] is True and gpu["ecc"]["sram_threshold_exceeded"] is False
    for block in ("volatile", "aggregate"):
        assert set(gpu["ecc"][block].values()) == {0}
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}


def test_real_blackwell_idle_link_below_its_max_generation() -> None:
    (gpu,) = gpu_health_readings.parse_health_xml(read_capture(BLACKWELL))
    pcie = gpu["pcie"]
    assert (pcie["gen_current"], pcie["gen_max"], pcie["gen_device_max"], pcie["gen_host_max"]) == (
        1,
        4,
        5,
        4,
    )
    assert (pcie["width_current"], pcie["width_max"]) == (16, 16)
    assert gpu["ecc"]["enabled"] is False and gpu["ecc"]["volatile"]["uncorrectable"] is None


def test_real_a100_without_remapped_rows_section_reads_none() -> None:
    (gpu,) = gpu_health_readings.parse_health_xml(read_capture(A100_V12))
    assert gpu["remapped_rows"] == {
        "correctable": None,
        "uncorrectable": None,
        "pending": None,
        "failure": None,
    }
    assert (gpu["pcie"]["gen_current"], gpu["pcie"]["width_current"]) == (4, 16)
    (mig,) = gpu_health_readings.parse_health_xml(read_capture(A100_MIG))
    assert mig["ecc"]["volatile"]["uncorrectable"] is None and mig["ecc"]["aggregate"]["uncorrectable"] == 0


def test_the_faults_maintenance_leaves_behind_read_as_such() -> None:
    text = read_capture(H200_IDLE)
    for old, new in (
        ("<current_link_width>16x<", "<current_link_width>8x<"),
        ("<remapped_row_pending>No<", "<remapped_row_pending>Yes<"),
        ("<remapped_row_unc>0<", "<remapped_row_unc>2<"),
        ("<replay_counter>0<", "<replay_counter>1200<"),
        ("<sram_uncorrectable_secded>0<", "<sram_uncorrectable_secded>3<"),
        ("<dram_uncorrectable>0<", "<dram_uncorrectable>4<"),
    ):
        assert old in text
        text = text.replace(old, new)
    (gpu,) = gpu_health_readings.parse_health_xml(text)
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["replay_counter"]) == (8, 1200)
    assert gpu["remapped_rows"]["pending"] is True and gpu["remapped_rows"]["uncorrectable"] == 2
    # SRAM parity + SEC-DED, then SRAM + DRAM: 3 + 4 in both blocks
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 7 and gpu["ecc"]["aggregate"]["sram_uncorrectable"] == 3


def test_the_recovery_action_reads_as_the_driver_prints_it() -> None:
    """The real H200 (driver 580) and Blackwell (590) -q -x carry <gpu_recovery_action>None; the A100
    (535) has no such element: unknown (None), not "None"."""
    (h200,) = gpu_health_readings.parse_health_xml(read_capture(H200_IDLE))
    (blackwell,) = gpu_health_readings.parse_health_xml(read_capture(BLACKWELL))
    (a100,) = gpu_health_readings.parse_health_xml(read_capture(A100_V12))
    assert (h200["recovery_action"], blackwell["recovery_action"], a100["recovery_action"]) == (
        "None",
        "None",
        None,
    )
    for action in ("GPU Reset", "Node Reboot", "Drain P2P", "Drain and Reset", "N/A"):
        text = read_capture(H200_IDLE).replace(
            "<gpu_recovery_action>None<", f"<gpu_recovery_action>{action}<"
        )
        (gpu,) = gpu_health_readings.parse_health_xml(text)
        assert gpu["recovery_action"] == (None if action == "N/A" else action)


def test_one_parse_serves_both_readers() -> None:
    root = nvidia_smi._safe_xml_root(read_capture(H200_IDLE))
    assert gpu_health_readings.health_from_root(root) == gpu_health_readings.parse_health_xml(
        read_capture(H200_IDLE)
    )


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("<current_link_width>16x<", "<current_link_width>\u0661\u0666x<", "a digit that is not 0-9"),
        ("<replay_counter>0<", "<replay_counter>-1<", "not a count"),
        ("<replay_counter>0<", "<replay_counter>NaN<", "not a count"),
        ("<remapped_row_pending>No<", "<remapped_row_pending>Maybe<", "not Yes/No"),
        ("<gpu_recovery_action>None<", "<gpu_recovery_action>Reboot; rm -rf<", "not a recovery action"),
        ("</nvidia_smi_log>", "", "malformed"),
    ],
)
def test_damaged_readings_are_refused(old: str, new: str, why: str) -> None:
    text = read_capture(H200_IDLE)
    assert old in text
    with pytest.raises(gpu_health_readings.ParseError, match=r"^nvidia-smi -q -x: .*" + why):
        gpu_health_readings.parse_health_xml(text.replace(old, new))
