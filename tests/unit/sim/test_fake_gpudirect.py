"""The simulated host pieces of GPUDirect RDMA and the NVIDIA services (issue 38): nvidia_peermem in
sysfs, the PCIe switches' ACS in the fake `lspci -D -vvv`, the units in `systemctl is-active`, an mlx5
firmware error in `dmesg`; and their faults, each read back with the readers and judges the node's
modules use (node/gpudirect.py, rdma/mlx5_health.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import xid
from ansible_collections.gpufleet.node.plugins.module_utils.node import gpudirect
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import mlx5_health
from gpufleet_sim import faults, state
from gpufleet_sim import gpudirect as sim_gpudirect
from gpufleet_sim.tools import dmesg, lspci, systemctl

from tests.unit.sim.fake_node import build_nodes, node_fixture, run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_nodes(tmp_path_factory, ("b300-16",), sim_gpudirect.render_modules)


b300 = node_fixture("b300-16", "built")


def bridges(node: Path) -> list[dict[str, Any]]:
    rc, out, err = run(lspci, node, "-D", "-vvv")
    assert (rc, err) == (0, "")
    return gpudirect.parse_lspci_acs(out)


def failed(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks if not c["ok"]}


def is_active(node: Path, *units: str) -> tuple[int, list[str]]:
    rc, out, _ = run(systemctl, node, "is-active", *units)
    return rc, out.split()


def test_a_clean_node_has_peermem_acs_off_on_its_switches_and_its_units_active(b300: Path) -> None:
    assert gpudirect.read_peermem(root=str(b300)) == {"loaded": True, "initstate": "live"}
    found = bridges(b300)
    ports = {b["port"] for b in found}
    assert ports == {"Root Port", "Upstream Port", "Downstream Port"}
    checks = gpudirect.acs_checks(found)
    switches = state.load(b300)["pci_switches"]
    # each switch's upstream port and a downstream port per child; root ports are not judged
    assert len(checks) == sum(1 + len(s["children"]) for s in switches)
    assert checks and not failed(checks)
    assert is_active(b300, *sim_gpudirect.NVIDIA_UNITS) == (0, ["active", "active"])
    # an RDMA device per NIC, by the PCI address the kernel log names it by
    devices = gpudirect.rdma_devices(str(b300))
    nics = state.load(b300)["nics"]
    assert devices == {n["pci_bus_id"]: n["ibdev"] for n in nics}


def test_peermem_missing_unloads_the_module_and_its_clear_loads_it(b300: Path) -> None:
    assert faults.inject(b300, "peermem-missing")
    reading = gpudirect.read_peermem(root=str(b300))
    assert reading == {"loaded": False, "initstate": None}
    check = gpudirect.peermem_check(reading)[0]
    assert (check["ok"], check["value"], check["limit"]) == (False, "not loaded", "loaded")
    assert "modprobe nvidia_peermem (and add it to /etc/modules-load.d)" in check["message"]
    assert faults.clear(b300, "peermem-missing")
    assert gpudirect.read_peermem(root=str(b300))["loaded"] is True


def test_acs_enabled_turns_acs_on_at_the_first_switchs_ports_only(b300: Path) -> None:
    assert faults.inject(b300, "acs-enabled")
    switch = state.load(b300)["pci_switches"][0]
    bad = failed(gpudirect.acs_checks(bridges(b300)))
    assert len(bad) == 1 + len(switch["children"])
    assert f"health.acs[{switch['upstream']}]" in bad
    one = bad[f"health.acs[{switch['upstream']}]"]
    assert one["value"] == "SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+" and one["limit"] == "off"
    assert faults.clear(b300, "acs-enabled")
    assert not failed(gpudirect.acs_checks(bridges(b300)))


def test_service_down_fails_the_fabric_manager(b300: Path) -> None:
    assert faults.inject(b300, "service-down")
    rc, words = is_active(b300, "nvidia-fabricmanager.service", "nvidia-dcgm.service")
    assert (rc, words) == (3, ["failed", "active"])
    bad = failed(gpudirect.service_checks(dict(zip(sim_gpudirect.NVIDIA_UNITS, words, strict=True))))
    assert list(bad) == ["health.service[nvidia-fabricmanager.service]"]
    assert faults.clear(b300, "service-down")
    assert is_active(b300, "nvidia-fabricmanager.service") == (0, ["active"])


def test_mlx5_fw_error_logs_the_health_pollers_lines_for_mlx5_1(b300: Path) -> None:
    assert faults.inject(b300, "mlx5-fw-error")
    rc, text, _ = run(dmesg, b300)
    assert rc == 0
    events = mlx5_health.parse_kernel_log(text)
    nic = next(n for n in state.load(b300)["nics"] if n["ibdev"] == "mlx5_1")
    assert {e["pci_bus_id"] for e in events} == {nic["pci_bus_id"]}
    assert [e["kind"] for e in events] == ["health_compromised", "health_issue", "syndrome"]
    assert xid.parse_kernel_log(text) == []  # an mlx5 line is no Xid
    bad = failed(mlx5_health.firmware_checks(events, gpudirect.rdma_devices(str(b300))))
    assert list(bad) == ["fabric.mlx5_firmware[mlx5_1]"]
    assert bad["fabric.mlx5_firmware[mlx5_1]"]["value"] == 3
    assert "syndrome 0x1: firmware internal error" in bad["fabric.mlx5_firmware[mlx5_1]"]["message"]
