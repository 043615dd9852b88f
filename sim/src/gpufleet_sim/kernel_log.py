"""A simulated node's kernel log (what `dmesg` prints): its boot lines and the events since boot.

State: ``kernel_log: {boot_t, cleared, events: [[t, level, text], ...]}`` with ``t`` the wall-clock
time of an event; `dmesg` prints it as seconds since ``boot_t``. The boot lines are written from the
node's state when read (kernel, driver, each NIC's firmware), so they always match what the node
is. A reboot (sim/boot.py) starts a new log: the events since the last boot are gone, as the ring
buffer's are on a real node. `dmesg --clear` hides everything logged so far.

Line texts follow real captures (tests/fixtures/real/xid, INDEX.md §11): the NVRM lines around an
Xid 79 (gpud's sxid README: ``GPU at PCI:...``, ``GPU Board Serial Number``, the Xid, ``GPU
0000:91:00.0: GPU has fallen off the bus.``) and the Xid 94 line (gpud's ISO dmesg capture:
``Contained: SM (0x1). RST: No, D-RST: No``). Stdlib only: the fake dmesg runs it on the node.
"""

from __future__ import annotations

from typing import Any

from gpufleet_sim.state import State, sysfs_bdf

# simulated: an Ubuntu 24.04 HWE kernel of the kind these nodes run
KERNEL = "6.8.0-60-generic"
# Levels as `dmesg --decode` names them.
INFO, NOTICE, WARN, ERR = "info", "notice", "warn", "err"
# Lines of one event are a few microseconds apart, as the driver prints them.
LINE_STEP_S = 0.000004


# A node answers (sshd, the tools) about this long after its kernel started: its boot lines come
# first and an event logged as soon as the node is up is not stamped before the driver loaded.
UP_AFTER_BOOT_S = 45.0


def boot(state: State, now: float) -> None:
    """A new log: the node (re)booted and is up at ``now``."""
    state["kernel_log"] = {"boot_t": now - UP_AFTER_BOOT_S, "cleared": False, "events": []}


def _log(state: State) -> dict[str, Any]:
    log: dict[str, Any] = state.setdefault("kernel_log", {"boot_t": 0.0, "cleared": False, "events": []})
    return log


def append(state: State, now: float, lines: list[tuple[str, str]]) -> None:
    """Logs ``(level, text)`` lines at ``now``, a few microseconds apart."""
    events = _log(state)["events"]
    for offset, (level, text) in enumerate(lines):
        events.append([now + offset * LINE_STEP_S, level, text])


def clear(state: State) -> None:
    log = _log(state)
    log["cleared"] = True
    log["events"] = []


def entries(state: State) -> list[tuple[float, str, str]]:
    """Every line since boot as ``(seconds since boot, level, text)``, oldest first."""
    log = _log(state)
    boot_t = float(log.get("boot_t", 0.0))
    lines = [] if log.get("cleared") else boot_lines(state)
    lines.extend((max(float(t) - boot_t, 0.0), str(level), str(text)) for t, level, text in log["events"])
    return lines


def boot_lines(state: State) -> list[tuple[float, str, str]]:
    """A few ordinary lines of a GPU node's boot (simulated wording, real shapes)."""
    driver = state.get("driver_version", "")
    lines = [
        (0.0, NOTICE, f"Linux version {KERNEL} (buildd@lcy02-amd64-080) #60-Ubuntu SMP PREEMPT_DYNAMIC"),
        (0.0, INFO, f"Command line: BOOT_IMAGE=/vmlinuz-{KERNEL} root=/dev/md0 ro quiet"),
        (0.0, INFO, f"DMI: gpufleet-sim {state.get('profile', '')}, BIOS 1.0 01/01/2026"),
    ]
    at = 4.2
    for nic in state.get("nics", []):
        lines.append((at, INFO, f"mlx5_core {nic['pci_bus_id']}: firmware version: {nic['fw_version']}"))
        at += 0.05
    lines.append((at + 1.0, WARN, "nvidia: loading out-of-tree module taints kernel."))
    lines.append(
        (at + 1.2, INFO, f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build")
    )
    lines.append((at + 1.3, INFO, "nvidia-nvlink: Nvlink Core is being initialized, major device number 234"))
    return lines


def xid_bus(gpu: dict[str, Any]) -> str:
    """The bus id the driver prints in an Xid line: 4-digit domain, bus and device (``0000:18:00``)."""
    return sysfs_bdf(str(gpu["pci_bus_id"])).rsplit(".", 1)[0]


def _gpu_lines(gpu: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (INFO, f"NVRM: GPU at PCI:{xid_bus(gpu)}: {gpu['uuid']}"),
        (INFO, f"NVRM: GPU Board Serial Number: {gpu['serial']}"),
    ]


def xid_79(gpu: dict[str, Any]) -> list[tuple[str, str]]:
    """The driver's lines when a GPU falls off the bus (Xid 79)."""
    device = sysfs_bdf(str(gpu["pci_bus_id"]))
    return [
        *_gpu_lines(gpu),
        (
            WARN,
            f"NVRM: Xid (PCI:{xid_bus(gpu)}): 79, pid='<unknown>', name=<unknown>, "
            "GPU has fallen off the bus.",
        ),
        (ERR, f"NVRM: GPU {device}: GPU has fallen off the bus."),
        (ERR, f"NVRM: GPU {device}: GPU serial number is {gpu['serial']}."),
    ]


def xid_94(gpu: dict[str, Any]) -> list[tuple[str, str]]:
    """A contained uncorrectable ECC error (Xid 94): the GPU keeps serving."""
    return [
        *_gpu_lines(gpu),
        (
            WARN,
            f"NVRM: Xid (PCI:{xid_bus(gpu)}): 94, pid='<unknown>', name=<unknown>, "
            "Contained: SM (0x1). RST: No, D-RST: No",
        ),
    ]


def link_change(nic: dict[str, Any], up: bool) -> list[tuple[str, str]]:
    """mlx5_core's line when a port's link goes down or comes up."""
    return [(INFO, f"mlx5_core {nic['pci_bus_id']} {nic['netdev']}: Link {'up' if up else 'down'}")]
