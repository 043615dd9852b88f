"""Every Xid NVIDIA's catalog says needs the GPU or the machine (a reset, a reboot, support) blocks the
gate and the watch, naming the action; an Xid gpufleet's catalog does not know blocks, naming the
catalog's source and the date it was read. The lines are the real Xid 48 line of gpud's capture
(tests/fixtures/real/xid) with its number changed, and Xid 154 as the driver prints it."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import xid
from ansible_collections.gpufleet.node.plugins.module_utils.node import node_health, watch

from tests.unit.mutations import read_capture

H200_IDLE = "h200-device/nvidia-smi-q-x-idle.xml"
H200_BUS = "0000:00:06"  # its GPU's 00000000:00:06.0, as the kernel log prints it
REAL_48 = "NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit"
# The codes: a GPU- or machine-level action, and the unused ones NVIDIA sends to support.
RESET_OR_REBOOT = [46, 109, 110, 136, 143, *range(144, 151), 154, 155, 156, 158]
CONTACT_SUPPORT = [56, 57, 58, 65, 73, 81]


def kernel_log(number: int) -> str:
    """gpud's real Xid 48 line, moved to the H200's bus and given ``number``."""
    lines = read_capture("xid/gpud-dmesg-time-format-iso-xid-48-63-94.log").splitlines()
    (line,) = [one for one in lines if REAL_48 in one]
    return line.replace("PCI:0000:19:00): 48,", f"PCI:{H200_BUS}): {number},") + "\n"


def xid_check(log: str) -> dict[str, Any]:
    reading = {
        "gpus": [{"uuid": "GPU-h200", "pci_bus_id": "00000000:00:06.0"}],
        "links": None,
        "xids": xid.parse_kernel_log(log),
    }
    (found,) = [c for c in node_health.judge(reading) if c["name"].startswith("health.xid")]
    return found


@pytest.mark.parametrize("number", RESET_OR_REBOOT + CONTACT_SUPPORT)
def test_an_xid_that_needs_the_gpu_or_the_machine_blocks_naming_the_action(number: int) -> None:
    found = xid_check(kernel_log(number))
    info = xid.describe(number)
    assert found["name"] == f"health.xid[{H200_BUS}]"
    assert (found["ok"], found["value"]) == (False, number)
    assert info is not xid.UNKNOWN and info.severity == "block"
    assert info.bucket in found["message"] and info.meaning in found["message"]
    expected = "CONTACT_SUPPORT" if number in CONTACT_SUPPORT else info.bucket
    assert info.bucket == expected and info.bucket not in ("RESTART_APP", "IGNORE")
    assert "does not block" not in found["message"]


def test_the_nvlink5_and_recovery_xids_name_their_buckets() -> None:
    assert {xid.describe(n).bucket for n in range(144, 151)} == {"WORKFLOW_NVLINK5_ERR"}
    assert xid.describe(154).bucket == "XID_154" and xid.describe(79).bucket == "RESTART_BM"
    assert {xid.describe(n).bucket for n in (46, 109, 110, 136, 143, 155, 156, 158)} == {"RESET_GPU"}


def test_the_driver_s_xid_154_line_blocks() -> None:
    line = (
        f"[ 8123.402115] NVRM: Xid (PCI:{H200_BUS}): 154, GPU recovery action changed from 0x0 (None) "
        "to 0x2 (Node Reboot Required)\n"
    )
    found = xid_check(line)
    assert found["ok"] is False and found["value"] == 154 and "Node Reboot" in found["message"]


def test_an_xid_the_catalog_does_not_know_blocks_naming_the_catalog() -> None:
    assert 175 not in xid.XID_CATALOG
    found = xid_check(kernel_log(175))
    assert (found["ok"], found["value"]) == (False, 175)
    assert "unknown to gpufleet's Xid catalog" in found["message"]
    assert xid.CATALOG_SOURCE in found["message"]
    assert "https://docs.nvidia.com/deploy/xid-errors/index.html" in xid.CATALOG_SOURCE
    assert "read 20" in xid.CATALOG_SOURCE  # the date it was read


def test_an_application_xid_still_warns() -> None:
    found = xid_check(kernel_log(13) + kernel_log(43))
    assert found["ok"] is True and "does not block" in found["message"] and "RESTART_APP" in found["message"]


def test_every_entry_blocks_as_its_bucket_says_but_63() -> None:
    """gpufleet's rule on NVIDIA's bucket, one exception written down: 63 waits for the GPU reset."""
    app_level = {"RESTART_APP", "IGNORE", "WORKFLOW_XID_45"}
    for number, info in xid.XID_CATALOG.items():
        expected = "warn" if info.bucket in app_level else "block"
        if number == 63:
            assert (info.bucket, info.severity) == ("IGNORE", "block")
            continue
        assert info.severity == expected, number
        assert info.bucket in info.action and info.meaning, number


def test_the_watch_judges_xids_with_the_gate_s_judge() -> None:
    """The watch's health read on a serving node: nvidia-smi -q -x and dmesg, the same judge."""
    outputs = {
        ("nvidia-smi", "-q", "-x"): read_capture(H200_IDLE),
        ("dmesg",): kernel_log(149) + kernel_log(175),
    }

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return 0, outputs[tuple(argv)], ""

    w = watch.Watch(run_command, "nvidia-smi", 5.0, {}, [], [], health={"dmesg": "dmesg", "nvlink": False})
    found, _fact = w._health()
    (checked,) = [c for c in found if c["name"] == f"health.xid[{H200_BUS}]"]
    assert checked["ok"] is False and checked["value"] == 149
    assert "Xid 149, 175" in checked["message"] and "WORKFLOW_NVLINK5_ERR" in checked["message"]
