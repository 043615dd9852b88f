"""node_health with GPUDirect RDMA's host pieces and mlx5 firmware errors (issue 38): the one kernel-log
read gives the Xids and the mlx5_core lines (a real CX-6 Dx capture, INDEX.md §13); the judge names
fabric.mlx5_firmware by RDMA device, gpudirect's checks, and the burn-in judges only the lines logged
during its load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import gpudirect, node_health
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read

from tests.unit.mutations import read_capture

H200_IDLE = "h200-device/nvidia-smi-q-x-idle.xml"
CX6DX = "xid/qemu-devel-dmesg-mlx5-health-compromised-cx6dx.log"
BOOT_LINE = "[    0.000000] Linux version 6.8.0-51-generic (buildd@lcy02-amd64-045)\n"


@pytest.fixture
def sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node with one RDMA device, mlx5_0 at 0000:0d:00.0 (the capture's card)."""
    pci = tmp_path / "sys" / "devices" / "pci0000:00" / "0000:0d:00.0"
    pci.mkdir(parents=True)
    ib = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0"
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(pci)
    monkeypatch.setattr(rdma_read, "SYSFS_ROOT", str(tmp_path))
    return tmp_path


def fake(logs: list[str]) -> Any:
    xml = read_capture(H200_IDLE)

    def run_command(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
        if argv == ["dmesg"]:
            return 0, logs.pop(0) if len(logs) > 1 else logs[0], ""
        assert argv == ["nvidia-smi", "-q", "-x"], argv
        return 0, xml, ""

    return run_command


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def test_the_kernel_log_read_once_gives_the_xids_and_the_mlx5_lines(sysfs: Path) -> None:
    readings = node_health.read(fake([BOOT_LINE + read_capture(CX6DX)]), "nvidia-smi", "dmesg", False)
    assert readings["xids"] == [] and len(readings["mlx5"]) == 10
    assert readings["nic_devices"] == {"0000:0d:00.0": "mlx5_0"}
    checks = by_name(node_health.judge(readings, 1))
    bad = checks["fabric.mlx5_firmware[mlx5_0]"]
    assert (bad["ok"], bad["value"], bad["limit"]) == (False, 3, 0)
    assert "in the kernel log since boot" in bad["message"]
    fact = node_health.fact(readings)
    assert fact["nic_firmware_errors"]["mlx5_0"] == 3 and fact["nic_firmware_errors"]["0000:0d:00.5"] == 1
    assert fact["gpudirect"] is None
    clean = node_health.read(fake([BOOT_LINE]), "nvidia-smi", "dmesg", False)
    assert by_name(node_health.judge(clean, 1))["fabric.mlx5_firmware[mlx5_0]"]["ok"] is True
    assert node_health.fact(clean)["nic_firmware_errors"] == {"mlx5_0": 0}


def test_gpudirect_checks_join_the_judge_and_can_be_turned_off(sysfs: Path) -> None:
    readings = node_health.read(fake([BOOT_LINE]), "nvidia-smi", "dmesg", False)
    readings["gpudirect"] = {"peermem": {"loaded": False, "initstate": None}, "acs": [], "services": {}}
    peermem = by_name(node_health.judge(readings, 1))["health.nvidia_peermem"]
    assert (peermem["ok"], peermem["value"], peermem["limit"]) == (False, "not loaded", "loaded")
    assert gpudirect.PEERMEM_FIX in peermem["message"]
    off = by_name(node_health.judge(readings, 1, off={"health.nvidia_peermem": "no RDMA on this profile"}))
    assert off["health.nvidia_peermem"]["ok"] is True
    assert (
        node_health.input_errors(
            {
                "expected_gpu_count": 1,
                "max_volatile_uncorrectable_ecc": 0,
                "max_aggregate_uncorrectable_ecc": None,
                "turned_off": {"health.acs": "a VM: the hypervisor needs ACS", "fabric.mlx5_firmware": "x"},
            },
            "thermal_gate_health_",
        )
        == []
    )


def test_the_burn_in_judges_only_the_mlx5_lines_logged_during_its_load(sysfs: Path) -> None:
    before = BOOT_LINE + read_capture(CX6DX)
    new = "[ 9000.000001] mlx5_core 0000:0d:00.0: poll_health:780:(pid 0): Fatal error 1 detected\n"
    options = {"nvlink": False, "expected_gpu_count": 1}
    after = node_health.AfterLoad(
        fake([before, before + new]), "nvidia-smi", "dmesg", options, "burn_in.health", "during the burn-in"
    )
    after.start()
    after.stop()
    bad = by_name(after.checks())["fabric.mlx5_firmware[mlx5_0]"]
    assert (bad["ok"], bad["value"]) == (False, 1)
    assert "during the burn-in" in bad["message"] and "Fatal error 1 detected" in bad["message"]
