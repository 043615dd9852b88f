"""gpudirect: nvidia_peermem in sysfs, the PCIe switches' ACS from lspci -vvv (a real capture,
tests/fixtures/real/pcie, INDEX.md §13, and the format of a switch port), the expected units."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.node import gpudirect

from tests.unit.mutations import read_capture

GPP_BRIDGE = "pcie/rccl-547-lspci-vvv-gpp-bridge-acs.txt"

SWITCH = (
    "0000:17:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) "
    "(prog-if 00 [Normal decode])\n"
    "\tCapabilities: [68] Express (v2) Upstream Port, MSI 00\n"
    "\tCapabilities: [2a0 v1] Access Control Services\n"
    "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
    "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    "\n"
    "0000:18:01.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) "
    "(prog-if 00 [Normal decode])\n"
    "\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\n"
    "\tCapabilities: [2a0 v1] Access Control Services\n"
    "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
    "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    "\n"
    "0000:19:00.0 3D controller: NVIDIA Corporation Device 3182 (rev a1)\n"
)


def test_the_real_bridge_reads_with_acs_on_and_no_port_type_shown() -> None:
    found = gpudirect.parse_lspci_acs(read_capture(GPP_BRIDGE))
    assert len(found) == 1
    bridge = found[0]
    assert bridge["bdf"] == "40:01.1" and bridge["port"] is None
    assert gpudirect.acs_enabled_bits(bridge) == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]
    assert bridge["acs_ctl"]["DirectTrans"] is False
    # not a switch port (the author left its Express line out): not judged
    assert gpudirect.acs_checks(found) == []


def test_switch_ports_are_judged_and_the_one_with_acs_on_fails_with_what_to_do() -> None:
    checks = gpudirect.acs_checks(gpudirect.parse_lspci_acs(SWITCH))
    by_name = {c["name"]: c for c in checks}
    assert sorted(by_name) == ["health.acs[0000:17:00.0]", "health.acs[0000:18:01.0]"]
    assert by_name["health.acs[0000:17:00.0]"]["ok"] is True
    bad = by_name["health.acs[0000:18:01.0]"]
    assert (bad["ok"], bad["value"], bad["limit"]) == (
        False,
        "SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+",
        "off",
    )
    assert (
        "Downstream Port" in bad["message"] and "setpci -s 0000:18:01.0 ECAP_ACS+0x6.w=0000" in bad["message"]
    )


def test_a_cut_acsctl_line_is_an_error() -> None:
    with pytest.raises(gpudirect.ParseError, match="ACSCtl does not read"):
        gpudirect.parse_lspci_acs(
            SWITCH.replace("UpstreamFwd+ EgressCtrl- DirectTrans-\n\n0000:19", "\n\n0000:19")
        )


def test_peermem_read_from_sysfs(tmp_path: Path) -> None:
    assert gpudirect.read_peermem(root=str(tmp_path)) == {"loaded": False, "initstate": None}
    module = tmp_path / "sys" / "module" / "nvidia_peermem"
    module.mkdir(parents=True)
    assert gpudirect.read_peermem(root=str(tmp_path))["loaded"] is True  # built in: no initstate
    (module / "initstate").write_text("going\n")
    assert gpudirect.read_peermem(root=str(tmp_path)) == {"loaded": False, "initstate": "going"}
    (module / "initstate").write_text("live\n")
    check = gpudirect.peermem_check(gpudirect.read_peermem(root=str(tmp_path)))[0]
    assert check["ok"] is True and check["name"] == "health.nvidia_peermem"
    assert gpudirect.peermem_check(None) == []


def test_services_from_one_systemctl_call_and_a_short_answer_fails_closed() -> None:
    calls = []

    def run_command(argv: list[str], **_: object) -> tuple[int, str, str]:
        calls.append(argv)
        return 3, "active\ninactive\n", ""

    units = ["nvidia-fabricmanager.service", "nvidia-dcgm.service"]
    found = gpudirect.read_services(run_command, "systemctl", units)
    assert calls == [["systemctl", "is-active", *units]]
    checks = {c["name"]: c for c in gpudirect.service_checks(found)}
    assert checks["health.service[nvidia-fabricmanager.service]"]["ok"] is True
    down = checks["health.service[nvidia-dcgm.service]"]
    assert (down["ok"], down["value"], down["limit"]) == (False, "inactive", "active")
    assert "systemctl enable --now nvidia-dcgm.service" in down["message"]
    with pytest.raises(gpudirect.ReadError, match="printed 2 states for 3 units"):
        gpudirect.read_services(run_command, "systemctl", [*units, "nvidia-imex.service"])


def test_auto_judges_peermem_and_acs_only_where_the_node_has_rdma_devices(tmp_path: Path) -> None:
    def run_command(argv: list[str], **_: object) -> tuple[int, str, str]:
        return 0, SWITCH, ""

    none = gpudirect.read(run_command, "auto", "lspci", None, [], root=str(tmp_path))
    assert (none["gpudirect"], none["peermem"], none["acs"]) == (False, None, None)
    assert gpudirect.judge(none) == []
    forced = gpudirect.read(run_command, "yes", "lspci", None, [], root=str(tmp_path))
    names = sorted(c["name"] for c in gpudirect.judge(forced) if not c["ok"])
    assert names == ["health.acs[0000:18:01.0]", "health.nvidia_peermem"]
    fact = gpudirect.fact(forced)
    assert fact == {
        "peermem_loaded": 0,
        "acs_enabled": {"0000:17:00.0": 0, "0000:18:01.0": 1},
        "services": {},
    }


def test_expected_units_must_be_unit_names() -> None:
    assert gpudirect.unit_errors(["nvidia-fabricmanager.service", "nvidia-imex.service"]) == []
    bad = gpudirect.unit_errors(["nvidia-fabricmanager", "x.service; reboot"])
    assert len(bad) == 2 and "'nvidia-fabricmanager' is not a systemd unit name" in bad[0]
