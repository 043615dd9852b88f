"""mlx5_health: mlx5_core's health poller lines from a real ConnectX-6 Dx kernel log
(tests/fixtures/real/mellanox, INDEX.md §13), and fabric.mlx5_firmware judged on them."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import xid
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import mlx5_health

from tests.unit.mutations import read_capture

CX6DX = "xid/qemu-devel-dmesg-mlx5-health-compromised-cx6dx.log"
XID_LOG = "xid/gpud-dmesg-with-xid-119.log"


def test_the_real_health_poller_lines_are_events_and_the_register_dump_is_not() -> None:
    events = mlx5_health.parse_kernel_log(read_capture(CX6DX))
    pf0 = [e for e in events if e["pci_bus_id"] == "0000:0d:00.0"]
    assert [e["kind"] for e in pf0] == ["health_compromised", "health_issue", "syndrome"]
    assert pf0[0]["timestamp"] == "445.937186" and pf0[0]["line"] == 1
    assert pf0[0]["message"].endswith("device's health compromised - reached miss count")
    assert pf0[2]["syndrome"] == "0x1: firmware internal error"
    # every function of the card lost its firmware: .0-.5, the .0 and .1 with the whole report
    assert collections_count(events) == {
        "0000:0d:00.0": 3,
        "0000:0d:00.1": 3,
        "0000:0d:00.2": 1,
        "0000:0d:00.3": 1,
        "0000:0d:00.4": 1,
        "0000:0d:00.5": 1,
    }


def collections_count(events: list[dict[str, object]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for event in events:
        out[str(event["pci_bus_id"])] = out.get(str(event["pci_bus_id"]), 0) + 1
    return out


def test_a_kernel_log_without_mlx5_errors_has_no_events() -> None:
    text = read_capture(XID_LOG)
    text = text if text.endswith("\n") else text + "\n"
    assert xid.parse_kernel_log(text) and mlx5_health.parse_kernel_log(text) == []


def test_an_empty_log_is_an_error_not_a_clean_nic() -> None:
    with pytest.raises(mlx5_health.ParseError, match="empty output"):
        mlx5_health.parse_kernel_log("")


def test_firmware_checks_fail_the_device_by_its_rdma_name_and_pass_the_others() -> None:
    events = mlx5_health.parse_kernel_log(read_capture(CX6DX))
    checks = mlx5_health.firmware_checks(events, {"0000:0d:00.0": "mlx5_0", "0000:0e:00.0": "mlx5_2"})
    by_name = {c["name"]: c for c in checks}
    bad = by_name["fabric.mlx5_firmware[mlx5_0]"]
    assert (bad["ok"], bad["value"], bad["limit"]) == (False, 3, 0)
    assert "at 445.937186 s" in bad["message"] and "syndrome 0x1: firmware internal error" in bad["message"]
    assert "mlxfwreset -d 0000:0d:00.0 reset" in bad["message"] and "run the gate again" in bad["message"]
    assert by_name["fabric.mlx5_firmware[mlx5_2]"]["ok"] is True
    # functions without an RDMA device are named by their address
    assert by_name["fabric.mlx5_firmware[0000:0d:00.5]"]["value"] == 1
    assert mlx5_health.firmware_checks(None, {"0000:0d:00.0": "mlx5_0"}) == []


def test_the_fatal_error_and_aborted_recovery_lines_of_health_c() -> None:
    text = (
        "[ 10.000001] mlx5_core 0000:3b:00.1: poll_health:780:(pid 0): Fatal error 1 detected\n"
        "[ 10.000002] mlx5_core 0000:3b:00.1: mlx5_health_try_recover:338:(pid 5553): health recovery "
        "flow aborted, PCI reads still not working\n"
        "[ 10.000003] mlx5_core 0000:3b:00.1 enp59s0f1np1: Link up\n"
    )
    assert [e["kind"] for e in mlx5_health.parse_kernel_log(text)] == ["fatal_error", "recovery_aborted"]
