# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mlx5 firmware errors in the kernel log: parsed, then judged per RDMA device.

- :func:`parse_kernel_log`: the text of ``dmesg`` (the same text xid.parse_kernel_log reads; one read
  of the log serves both) -> every line mlx5_core's health poller or its firmware syndrome report
  printed, as an event: the function's PCI address, what kind of line it is, the line's text after the
  address, its timestamp as printed.
- :func:`firmware_checks`: ``fabric.mlx5_firmware[<dev>]`` per RDMA device (by its PCI function):
  any such line fails, naming the first and the syndrome, with what to do.

The lines, as mlx5_core prints them (a real ConnectX-6 Dx, tests/fixtures/real/xid/
qemu-devel-dmesg-mlx5-health-compromised-cx6dx.log, INDEX.md §13)::

    mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health compromised - reached miss count
    mlx5_core 0000:0d:00.0: print_health_info:431:(pid 0): Health issue observed, firmware internal
    error, severity(3) ERROR:    (one line)
    mlx5_core 0000:0d:00.0: print_health_info:447:(pid 0): synd 0x1: firmware internal error

and, from the same poller in drivers/net/ethernet/mellanox/mlx5/core/health.c, ``Fatal error %u
detected`` and the recovery flow's ``health recovery flow aborted, ...`` (NVSentinel's NIC health
monitor lists these as the fatal mlx5_core patterns: docs.nvidia.com/nvsentinel, NIC Health Monitor:
Syslog Detection, Appendix A). A line of print_health_info's register dump (assert_var, fw_ver, ...) is
not an event of its own: the ``Health issue observed`` line before it is.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard, has_surrogates
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

TOOL = "kernel log (mlx5_core health)"

_HEX = "[0-9A-Fa-f]"
_LINE = re.compile(r"mlx5_core (" + _HEX + r"{4}:" + _HEX + r"{2}:" + _HEX + r"{2}\." + _HEX + r"): (.*)$")
# (kind, words of the line), first match wins: what the health poller and the syndrome report print
# (``synd 0x..`` as a word: print_health_info's ``ext_synd 0x8f7a`` after it is no event of its own).
KINDS = (
    ("health_compromised", re.compile(r"health compromised")),
    ("fatal_error", re.compile(r"fatal error")),
    ("recovery_aborted", re.compile(r"health recovery flow aborted")),
    ("health_issue", re.compile(r"health issue observed")),
    ("syndrome", re.compile(r"(?:^|\s)synd 0x")),
)
_SYNDROME = re.compile(r"synd (0x" + _HEX + r"+): (.*)$")
_TIMESTAMP = re.compile(r"\[\s*([0-9]+\.[0-9]+)\]")


class ParseError(ValueError):
    """Raised when the kernel log is empty or holds an mlx5_core line that does not read."""


@guard(ParseError, TOOL)
def parse_kernel_log(text: str) -> list[dict[str, Any]]:
    """Kernel log text -> ``[{pci_bus_id, kind, message, syndrome, timestamp, line}]`` in log order:
    ``pci_bus_id`` the function's full address (``0000:0d:00.0``, lower case); ``kind`` one of
    :data:`KINDS`; ``syndrome`` ``"0x1: firmware internal error"`` on a syndrome line, else None;
    ``timestamp`` dmesg's seconds since boot as printed, None without one; ``line`` 1-based."""
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find("mlx5_core ")
        if at < 0:
            continue
        match = _LINE.search(line, at)
        if not match:
            continue  # "mlx5_core" in another driver's words, or its interface name line
        lowered = match.group(2).lower()
        kind = next((k for k, words in KINDS if words.search(lowered)), None)
        if kind is None:
            continue
        if has_surrogates(line):
            raise ParseError("%s: line %d holds bytes that are not UTF-8" % (TOOL, number))
        message = match.group(2).strip()
        syndrome = _SYNDROME.search(message) if kind == "syndrome" else None
        stamp = _TIMESTAMP.search(line[:at])
        events.append(
            {
                "pci_bus_id": match.group(1).lower(),
                "kind": kind,
                "message": message,
                "syndrome": "%s: %s" % (syndrome.group(1), syndrome.group(2)) if syndrome else None,
                "timestamp": stamp.group(1) if stamp else None,
                "line": number,
            }
        )
    return events


# What the kernel log portion holds, as the check's message says it.
SINCE_BOOT = "since boot"


def firmware_checks(
    events: list[dict[str, Any]] | None,
    devices: Mapping[str, str],
    since: str = SINCE_BOOT,
) -> list[dict[str, Any]]:
    """``fabric.mlx5_firmware[<dev>]``: one check per RDMA device (``devices``: its PCI address ->
    ibdev, sysfs), failing with the count of mlx5_core health lines for it; a function with events and
    no RDMA device (a VF, an unbound port) is named by its PCI address. Devices without events pass.
    None (the log not read): no checks."""
    if events is None:
        return []
    by_bus: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_bus.setdefault(event["pci_bus_id"], []).append(event)
    names = dict(devices)
    for bus in by_bus:
        names.setdefault(bus, bus)
    out = []
    for bus, dev in sorted(names.items(), key=lambda item: item[1]):
        found = by_bus.get(bus, [])
        if not found:
            out.append(
                check(
                    "fabric.mlx5_firmware[%s]" % dev,
                    True,
                    0,
                    0,
                    "lines",
                    "%s (%s): no mlx5_core firmware error in the kernel log %s" % (dev, bus, since),
                )
            )
            continue
        first = found[0]
        syndromes = sorted({e["syndrome"] for e in found if e["syndrome"]})
        out.append(
            check(
                "fabric.mlx5_firmware[%s]" % dev,
                False,
                len(found),
                0,
                "lines",
                "%s (%s): %d mlx5_core firmware error line(s) in the kernel log %s, the first%s: %r%s. "
                "The NIC's firmware stopped answering or asserted: its RDMA traffic failed or will; "
                "save the lines and `mlxfwreset`/`devlink health` output for NVIDIA support, reset the "
                "NIC (mlxfwreset -d %s reset) or reboot the node, then run the gate again"
                % (
                    dev,
                    bus,
                    len(found),
                    since,
                    "" if first["timestamp"] is None else " at %s s" % first["timestamp"],
                    first["message"][:160],
                    "; syndrome %s" % ", ".join(syndromes) if syndromes else "",
                    bus,
                ),
            )
        )
    return out
