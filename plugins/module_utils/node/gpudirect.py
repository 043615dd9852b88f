# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host pieces GPUDirect RDMA and the GPUs' services need, read and judged (node_health's judge,
the gate and the watch).

Readings:
- ``/sys/module/nvidia_peermem/initstate`` (the kernel's own record of a loaded module; no tool):
  nvidia_peermem lets the NIC read and write GPU memory; without it NCCL falls back to staging
  RDMA through host memory, slower, with nothing failing;
- ``lspci -D -vvv`` -> :func:`parse_lspci_acs`: every PCIe bridge's Access Control Services control
  register as lspci prints it (``ACSCtl:\\tSrcValid+ TransBlk- ReqRedir+ ...``, the format of a real
  capture: tests/fixtures/real/pcie/, INDEX.md §13) and its port type (``Express (v2) Downstream
  Port``);
- ``systemctl is-active <unit>...``: each expected unit's state, one word a line in the order asked.

Checks (results.check):
- ``health.nvidia_peermem``: the module loaded, where the profile uses GPUDirect RDMA;
- ``health.acs[<bdf>]``: ACS off on every PCIe switch port (upstream and downstream ports: the bridges
  between a GPU and the NIC beside it). With ACS on, the switch redirects peer-to-peer traffic up to
  the root complex: GPUDirect P2P and RDMA slow down or fail (NCCL's troubleshooting guide: "PCI
  Access Control Services (ACS) must be disabled"). Root ports are not judged: the kernel enables ACS
  there on every host, and GPU-NIC traffic under one switch never crosses them;
- ``health.service[<unit>]``: each unit the profile expects (nvidia-fabricmanager on an HGX
  baseboard, nvidia-persistenced, nvidia-dcgm where the gate runs DCGM, nvidia-imex where used) active.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check
from ansible_collections.gpufleet.node.plugins.module_utils.rdma import rdma_read

RunCommand = Callable[..., tuple[int, str, str]]

PEERMEM = "nvidia_peermem"
PEERMEM_FIX = "modprobe nvidia_peermem (and add it to /etc/modules-load.d) then run the gate again"
# gpudirect_rdma: "auto" judges nvidia_peermem and ACS where the node has RDMA devices (sysfs
# class/infiniband), "yes" always, "no" never.
GPUDIRECT_CHOICES = ("auto", "yes", "no")

LSPCI_TOOL = "lspci -D -vvv"
# The ACS control bits that change where a peer-to-peer request goes (every one but DirectTrans,
# which lets translated P2P requests through): any set is ACS on. NCCL's guide clears them all
# (setpci ECAP_ACS+0x6.w=0000).
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl")
# The port types judged: a PCIe switch's ports.
SWITCH_PORTS = ("Upstream Port", "Downstream Port")

_HEADER = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) (.*)$")
_EXPRESS = re.compile(r"Express (?:\(v[0-9]\) )?((?:Root|Upstream|Downstream) Port)")
_FLAG = re.compile(r"([A-Za-z]+)([+-])")


_UNIT = re.compile(r"^[A-Za-z0-9@._:-]+\.(?:service|target|socket|mount|timer)$")


def unit_errors(units: list[str] | None) -> list[str]:
    """Every expected unit that is not a systemd unit name (expected_services,
    thermal_gate_health_expected_services)."""
    return [
        "expected_services (thermal_gate_health_expected_services): %r is not a systemd unit name "
        "(nvidia-fabricmanager.service)" % (unit,)
        for unit in units or []
        if not isinstance(unit, str) or not _UNIT.match(unit)
    ]


class ParseError(ValueError):
    """Raised when lspci's output is empty or an ACS line does not read."""


@guard(ParseError, LSPCI_TOOL)
def parse_lspci_acs(text: str) -> list[dict[str, Any]]:
    """``lspci -vvv`` -> ``[{bdf, description, port, acs_ctl}]`` for every device with an ACS
    control line: ``bdf`` as printed (with ``-D`` the domain, ``0000:3a:00.0``); ``port`` ``"Root
    Port"``, ``"Upstream Port"``, ``"Downstream Port"`` or None when lspci's Express line is not shown;
    ``acs_ctl`` {bit: bool} as ``ACSCtl:`` prints them."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            current = {"bdf": header.group(1).lower(), "description": header.group(2), "port": None}
            continue
        if current is None:
            continue
        stripped = line.strip()
        express = _EXPRESS.search(stripped) if stripped.startswith("Capabilities:") else None
        if express:
            current["port"] = express.group(1)
        elif stripped.startswith("ACSCtl:"):
            flags = dict(_FLAG.findall(stripped[len("ACSCtl:") :]))
            if not flags or any(bit not in flags for bit in ACS_BITS):
                raise ParseError("%s: line %d: ACSCtl does not read: %r" % (LSPCI_TOOL, number, line[:120]))
            current["acs_ctl"] = {bit: sign == "+" for bit, sign in flags.items()}
            out.append(current)
    return out


def acs_enabled_bits(bridge: Mapping[str, Any]) -> list[str]:
    """The ACS control bits that are on (ACS_BITS' order)."""
    return [bit for bit in ACS_BITS if (bridge.get("acs_ctl") or {}).get(bit)]


# ---------------------------------------------------------------- readers


class ReadError(Exception):
    """A tool could not be run or read: the message names it."""


def read_peermem(root: str | None = None) -> dict[str, Any]:
    """``{loaded, initstate}``: /sys/module/nvidia_peermem/initstate (``live`` when loaded; the
    directory is absent when it is not)."""
    path = rdma_read.sysfs_path("module", PEERMEM, "initstate", root=root)
    try:
        with open(path, encoding="utf-8") as handle:
            state = handle.read().strip()
    except OSError:
        if os.path.isdir(os.path.dirname(path)):
            return {"loaded": True, "initstate": None}  # built into the kernel: no initstate
        return {"loaded": False, "initstate": None}
    return {"loaded": state == "live", "initstate": state}


def read_acs(run_command: RunCommand, lspci: str) -> list[dict[str, Any]]:
    rc, out, err = tool_runner.read_command(
        run_command, [lspci, "-D", "-vvv"], environ_update=tool_runner.ENV
    )
    if rc != 0:
        raise ReadError("%s failed (rc=%s): %s" % (LSPCI_TOOL, rc, tool_runner.first_line(err, out)))
    try:
        return parse_lspci_acs(out)
    except ParseError as exc:
        raise ReadError(str(exc)) from exc


def read_services(run_command: RunCommand, systemctl: str, units: list[str]) -> dict[str, str]:
    """{unit: its ActiveState word} from one ``systemctl is-active`` (exit 3 when one is not active)."""
    if not units:
        return {}
    rc, out, err = run_command([systemctl, "is-active", *units], environ_update=tool_runner.ENV)
    words = out.split()
    if len(words) != len(units):
        raise ReadError(
            "systemctl is-active %s (rc=%s) printed %d states for %d units: %s"
            % (" ".join(units), rc, len(words), len(units), tool_runner.first_line(err, out))
        )
    return dict(zip(units, words, strict=True))


def rdma_devices(root: str | None = None) -> dict[str, str]:
    """{PCI address: ibdev} of the node's RDMA devices (sysfs class/infiniband/<dev>/device)."""
    out = {}
    for ibdev in rdma_read.list_ib_devices(root):
        link = rdma_read.sysfs_path("class", "infiniband", ibdev, "device", root=root)
        target = os.path.basename(os.path.realpath(link))
        if target and target != "device":
            out[target.lower()] = ibdev
    return out


def judged(gpudirect_rdma: str, devices: Mapping[str, str]) -> bool:
    """Whether nvidia_peermem and ACS are judged: ``yes``, or ``auto`` on a node with RDMA devices."""
    return gpudirect_rdma == "yes" or (gpudirect_rdma == "auto" and bool(devices))


def read(
    run_command: RunCommand,
    gpudirect_rdma: str,
    lspci: str | None,
    systemctl: str | None,
    units: list[str],
    root: str | None = None,
) -> dict[str, Any]:
    """``{rdma_devices, gpudirect, peermem, acs, services}``: ``gpudirect`` whether nvidia_peermem and
    ACS are judged (``auto``: the node has RDMA devices); ``peermem``/``acs`` None when not."""
    devices = rdma_devices(root)
    used = judged(gpudirect_rdma, devices)
    acs = None
    if used:
        if lspci is None:
            raise ReadError("lspci is not installed (pciutils): the PCIe switches' ACS cannot be read")
        acs = read_acs(run_command, lspci)
    services: dict[str, str] = {}
    if units:
        if systemctl is None:
            raise ReadError("systemctl is not on this node: the expected services cannot be read")
        services = read_services(run_command, systemctl, units)
    return {
        "rdma_devices": devices,
        "gpudirect": used,
        "peermem": read_peermem(root) if used else None,
        "acs": acs,
        "services": services,
    }


# ---------------------------------------------------------------- judges


def peermem_check(peermem: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """``health.nvidia_peermem``: loaded (None: GPUDirect RDMA not used, not judged)."""
    if peermem is None:
        return []
    loaded, state = bool(peermem.get("loaded")), peermem.get("initstate")
    if loaded:
        message = "nvidia_peermem is loaded (GPUDirect RDMA: the NICs reach GPU memory directly)"
    else:
        message = (
            "nvidia_peermem is not loaded (/sys/module/nvidia_peermem/initstate: %s): the NICs cannot "
            "reach GPU memory, NCCL stages RDMA through host memory (slower, nothing fails); %s"
            % (state or "absent", PEERMEM_FIX)
        )
    return [
        check("health.nvidia_peermem", loaded, "loaded" if loaded else "not loaded", "loaded", "", message)
    ]


def acs_checks(bridges: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``health.acs[<bdf>]`` per PCIe switch port with an ACS capability (None: not judged)."""
    if bridges is None:
        return []
    out = []
    for bridge in bridges:
        if bridge.get("port") not in SWITCH_PORTS:
            continue
        on = acs_enabled_bits(bridge)
        where = "%s (%s, %s)" % (bridge["bdf"], bridge["port"], bridge.get("description", "")[:80])
        if not on:
            message = "%s: ACS off (ACSCtl: no redirect, P2P stays in the switch)" % where
        else:
            message = (
                "%s: ACS on (ACSCtl: %s): the switch sends GPU-NIC peer-to-peer traffic up to the root "
                "complex, GPUDirect RDMA and P2P slow down or fail (NCCL: ACS must be disabled). Turn "
                "ACS off in the BIOS (or at boot: setpci -s %s ECAP_ACS+0x6.w=0000), then run the gate "
                "again" % (where, " ".join(b + "+" for b in on), bridge["bdf"])
            )
        out.append(
            check(
                "health.acs[%s]" % bridge["bdf"],
                not on,
                " ".join(b + "+" for b in on) or "off",
                "off",
                "",
                message,
            )
        )
    return out


def service_checks(services: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """``health.service[<unit>]`` per expected unit: ``active`` passes."""
    out = []
    for unit, state in sorted((services or {}).items()):
        ok = state == "active"
        message = "%s is %s" % (unit, state)
        if not ok:
            message += (
                ": the profile expects it running (thermal_gate_health_expected_services); see "
                "`systemctl status %s` and `journalctl -u %s`, start it (systemctl enable --now %s), then "
                "run the gate again" % (unit, unit, unit)
            )
        out.append(check("health.service[%s]" % unit, ok, state, "active", "", message))
    return out


def judge(readings: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every check of :func:`read`'s readings (None: not read, no checks)."""
    if readings is None:
        return []
    return (
        peermem_check(readings.get("peermem"))
        + acs_checks(readings.get("acs"))
        + service_checks(readings.get("services"))
    )


def fact(readings: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the watch publishes: ``{peermem_loaded, acs_enabled: {bdf: 0/1}, services: {unit: 0/1}}``
    (peermem_loaded None and acs_enabled {} where GPUDirect RDMA is not judged)."""
    if readings is None:
        return None
    peermem = readings.get("peermem")
    return {
        "peermem_loaded": None if peermem is None else int(bool(peermem.get("loaded"))),
        "acs_enabled": {
            b["bdf"]: int(bool(acs_enabled_bits(b)))
            for b in readings.get("acs") or []
            if b.get("port") in SWITCH_PORTS
        },
        "services": {
            unit: int(state == "active") for unit, state in (readings.get("services") or {}).items()
        },
    }
