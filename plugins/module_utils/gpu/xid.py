# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA Xid events from the kernel log, and what each Xid means for a node.

- :func:`parse_kernel_log`: the text of ``dmesg`` (any ``--time-format``, ``--decode``) or
  ``journalctl -k`` -> every ``NVRM: Xid (PCI:<bus id>): <xid>, ...`` line as an event: the Xid
  number, the GPU's PCI bus id, the pid and process name when the driver knew them, the message,
  and the line's timestamp as printed (None when the line has none).
- :data:`XID_CATALOG` / :func:`describe`: Xid -> (severity, what it usually means, the action).

The driver prints ``NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, <message>``
(newer), ``... 119, pid=2024380, name=nvidia-smi, <message>``, or ``... 79, GPU has fallen off
the bus.`` (older, no pid/name); very old drivers leave out ``PCI:``. A line that names
``NVRM: Xid`` but does not read as one is refused (ParseError naming the tool): a damaged Xid
line must not pass as "no Xid". Give the whole log, not a grep of it: an empty read is an error
(the log could not be read), while a log with no Xid line gives ``[]``.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard, has_surrogates

TOOL = "kernel log (Xid)"

_HEX = "[0-9A-Fa-f]"
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(" + _HEX + r"{4,8}:" + _HEX + r"{2}:" + _HEX + r"{2}(?:\." + _HEX + r")?)\): "
    r"([0-9]{1,4}), (.*)$"
)
_PID_NAME = re.compile(r"^pid=(?:'<unknown>'|<unknown>|([0-9]{1,10})), name=(<unknown>|[^,]*), (.*)$")
# Timestamps as dmesg and journalctl print them, in front of "NVRM:".
_TIMESTAMPS = (
    re.compile(r"\[\s*([0-9]+\.[0-9]+)\]"),  # dmesg: seconds since boot
    re.compile(r"\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} [0-9]{4})\]"),  # dmesg -T / --ctime
    re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(?:[,.][0-9]+)?(?:[+-][0-9]{2}:?[0-9]{2}|Z)?)"),  # iso
    re.compile(r"^([A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8}) "),  # syslog / journalctl short
)


class ParseError(ValueError):
    """Raised when the kernel log is empty, cut, or holds an Xid line that does not read as one."""


class XidInfo(NamedTuple):
    """severity: "block" (the node must not serve until the action is done) or "warn"."""

    severity: str
    meaning: str
    action: str


# NVIDIA's Xid catalog for Ampere and newer ("Analyzing Xid Errors with the Xid Catalog",
# https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and "Xid Errors",
# https://docs.nvidia.com/deploy/xid-errors/index.html) gives each Xid a resolution bucket
# (RESTART_APP, RESET_GPU, RESTART_BM, CONTACT_SUPPORT, a WORKFLOW_*). gpufleet's rule: an Xid
# whose immediate action is on the GPU or the machine (reset, reboot, service) blocks the node;
# one whose action is on the application, or none, warns. Meanings follow the catalog's wording.
XID_CATALOG: dict[int, XidInfo] = {
    13: XidInfo(
        "warn",
        "Graphics Engine Exception (usually the application: an illegal address or instruction)",
        "restart the application; run the GPU diagnostics if it repeats with different programs",
    ),
    31: XidInfo(
        "warn",
        "GPU memory page fault (usually the application accessing memory it did not map)",
        "restart the application; debug it if it repeats",
    ),
    43: XidInfo(
        "warn",
        "GPU stopped processing (the application's channel hit a fault and was stopped)",
        "restart the application; the GPU keeps serving others",
    ),
    45: XidInfo(
        "warn",
        "Preemptive cleanup, due to previous errors (the driver stopped the channels of a "
        "process that ended or faulted)",
        "none by itself; look at the Xid before it",
    ),
    48: XidInfo(
        "block",
        "Double Bit ECC Error: an uncorrectable error in GPU memory",
        "reset the GPU (nvidia-smi -r) so the row is remapped; replace it if Xid 64 or a remapping "
        "failure follows",
    ),
    61: XidInfo(
        "block",
        "Internal micro-controller breakpoint/warning",
        "reset the GPU; contact support if it repeats",
    ),
    62: XidInfo("block", "Internal micro-controller halt", "reset the GPU; contact support if it repeats"),
    63: XidInfo(
        "block",
        "ECC page retirement or row remapping recording event: a row is marked for "
        "remapping, which takes effect at the next GPU reset",
        "reset the GPU to activate the remap",
    ),
    64: XidInfo(
        "block",
        "ECC page retirement or row remapper recording failure: the remap could not be "
        "recorded (reserved rows exhausted)",
        "drain the node and have the GPU serviced (RMA)",
    ),
    68: XidInfo("warn", "NVDEC0 Exception: video decoder error", "restart the application"),
    69: XidInfo("warn", "Graphics Engine class error", "restart the application; debug it if it repeats"),
    74: XidInfo(
        "block",
        "NVLink Error: a link between this GPU and another GPU or NVSwitch failed",
        "check nvidia-smi nvlink -s/-e, reseat, reset the GPU; contact support if it repeats",
    ),
    79: XidInfo(
        "block",
        "GPU has fallen off the bus: the GPU no longer answers on PCIe",
        "drain the node and reboot it; check the slot, riser, power and the PCIe link; service if it repeats",
    ),
    92: XidInfo(
        "warn",
        "High single-bit ECC error rate",
        "watch the ECC counters and row remaps; service if they grow",
    ),
    94: XidInfo(
        "warn",
        "Contained ECC error: an uncorrectable memory error contained to the application that "
        "hit it; the GPU still serves",
        "restart the affected application; reset the GPU at the next drain to remap the row",
    ),
    95: XidInfo(
        "block",
        "Uncontained ECC error: an uncorrectable memory error that may have reached other applications",
        "drain the node and reset the GPU",
    ),
    119: XidInfo(
        "block",
        "GSP RPC timeout: the GPU System Processor stopped answering the driver",
        "drain the node and reset the GPU (reboot if the reset fails)",
    ),
    120: XidInfo(
        "block",
        "GSP error: the GPU System Processor reported an error",
        "drain the node and reset the GPU (reboot if the reset fails)",
    ),
    140: XidInfo(
        "block",
        "Unrecovered ECC error in GPU memory",
        "drain the node and reset the GPU; service if it repeats",
    ),
}

UNKNOWN = XidInfo("warn", "an Xid not in gpufleet's table", "look it up in NVIDIA's Xid catalog")


def describe(xid: int) -> XidInfo:
    """The catalog's entry for ``xid``, or UNKNOWN (warn) for one gpufleet does not list."""
    return XID_CATALOG.get(xid, UNKNOWN)


def _timestamp(prefix: str) -> str | None:
    for pattern in _TIMESTAMPS:
        found = pattern.search(prefix)
        if found:
            return found.group(1)
    return None


@guard(ParseError, TOOL, complete=True)
def parse_kernel_log(text: str) -> list[dict[str, Any]]:
    """Kernel log text -> ``[{xid, pci_bus_id, pid, process, message, timestamp, line}]`` in log
    order. ``pci_bus_id`` as the driver prints it (``0000:19:00``, lower case); ``pid`` and
    ``process`` None when the driver printed ``<unknown>`` or nothing; ``timestamp`` the text in
    front of ``NVRM:`` as printed (seconds since boot, ISO or ctime), None when there is none;
    ``line`` the 1-based line number."""
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find("NVRM: Xid")
        if at < 0:
            continue
        match = _XID.search(line, at)
        if not match or match.start() != at:
            raise ParseError(
                "%s: line %d names NVRM: Xid but does not read as one: %r" % (TOOL, number, line[:120])
            )
        if has_surrogates(line):
            raise ParseError("%s: line %d holds bytes that are not UTF-8" % (TOOL, number))
        bus_id, xid, rest = match.groups()
        pid: int | None = None
        process: str | None = None
        named = _PID_NAME.match(rest)
        if named:
            pid = None if named.group(1) is None else int(named.group(1))
            process = None if named.group(2) == "<unknown>" else named.group(2)
            rest = named.group(3)
        elif rest.startswith("pid="):
            raise ParseError(
                "%s: line %d: pid/name of Xid %s do not read: %r" % (TOOL, number, xid, rest[:80])
            )
        events.append(
            {
                "xid": int(xid),
                "pci_bus_id": bus_id.lower(),
                "pid": pid,
                "process": process,
                "message": rest.strip(),
                "timestamp": _timestamp(line[:at]),
                "line": number,
            }
        )
    return events
