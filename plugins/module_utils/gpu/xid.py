# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA Xid and NVSwitch SXid events from the kernel log, and what each means for a node.

- :func:`parse_kernel_log`: the text of ``dmesg`` (any ``--time-format``, ``--decode``) or
  ``journalctl -k`` -> every ``NVRM: Xid (PCI:<bus id>): <xid>, ...`` line as an event: the Xid
  number, the GPU's PCI bus id, the pid and process name when the driver knew them, the message,
  and the line's timestamp as printed (None when the line has none).
- :data:`XID_CATALOG` / :func:`describe`: Xid -> (severity, what it usually means, the action, NVIDIA's
  resolution bucket), after NVIDIA's catalog (:data:`CATALOG_SOURCE`, with the date it was read). An
  Xid it does not list blocks (:data:`UNKNOWN`): a newer GPU's Xid is not waved through as a warning.

- :func:`parse_kernel_events`: the same one pass over the log, its Xid events and its NVSwitch SXid
  events (``nvidia-nvswitch<N>: SXid (PCI:<bus id>): <sxid>, ...``, the nvidia-nvswitch driver on an
  HGX baseboard); :func:`describe_sxid` says what gpufleet does with one.

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
    """severity: "block" (the node must not serve until the action is done) or "warn"; bucket: NVIDIA's
    resolution bucket for the immediate action, as its catalog gives it (UNKNOWN: none)."""

    severity: str
    meaning: str
    action: str
    bucket: str


# Where XID_CATALOG comes from, and when it was read: an Xid NVIDIA added since is unknown to it.
CATALOG_SOURCE = (
    "NVIDIA's Xid catalog, https://docs.nvidia.com/deploy/xid-errors/index.html "
    "(its table: analyzing-xid-catalog.html), read 2026-12-06"
)

# gpufleet's rule on NVIDIA's resolution bucket (the catalog's "Immediate Action"): an action on the
# application, or none, warns; one on the GPU or the machine (reset, reboot, service, support) blocks.
_BUCKETS: dict[str, tuple[str, str]] = {
    "RESTART_APP": ("warn", "restart the application"),
    "IGNORE": ("warn", "none needed by itself"),
    "WORKFLOW_XID_45": ("warn", "none by itself; look at the Xid before it"),
    "RESET_GPU": ("block", "drain the node and reset the GPU (nvidia-smi -r); contact support if it repeats"),
    "RESTART_BM": ("block", "drain the node and reboot it"),
    "RESTART_VM": ("block", "restart the virtual machine the GPU is given to"),
    "CONTACT_SUPPORT": ("block", "contact NVIDIA support: the catalog gives no recovery of its own"),
    "CHECK_MECHANICALS": ("block", "check the GPU board's auxiliary power cables and seating"),
    "UPDATE_SWFW": ("block", "update the GPU driver and firmware"),
    "CHECK_UVM": ("block", "check the unified memory (UVM) driver's state; reset the GPU if it persists"),
    "WORKFLOW_NVLINK_ERR": (
        "block",
        "check nvidia-smi nvlink -s/-e, reseat, reset the GPU or reboot the node; contact support if it "
        "repeats",
    ),
    "WORKFLOW_NVLINK5_ERR": (
        "block",
        "follow NVIDIA's NVLink5 workflow: the Xid 154 beside it names the recovery (GPU reset or node "
        "reboot); contact support if it repeats",
    ),
    "WORKFLOW_XID_48": (
        "block",
        "reset the GPU (nvidia-smi -r) or reboot the node so the row is remapped; replace it if Xid 64 or "
        "a remapping failure follows",
    ),
    "XID_154": (
        "block",
        "do the recovery the line names (Drain P2P, Drain and Reset, GPU Reset or Node Reboot)",
    ),
}


def _xid(bucket: str, meaning: str, action: str | None = None, severity: str | None = None) -> XidInfo:
    """An entry: gpufleet's severity from NVIDIA's bucket (unless ``severity`` says why not), the
    catalog's description as ``meaning``, and the action, naming the bucket."""
    rule, default = _BUCKETS[bucket]
    return XidInfo(severity or rule, meaning, "%s (NVIDIA: %s)" % (action or default, bucket), bucket)


# NVIDIA's catalog for Ampere and newer (CATALOG_SOURCE): every Xid it says applies to A100, H100,
# B100 or GB200 with an immediate action, and unused ones seen named in its CONTACT_SUPPORT bucket. Meanings
# follow the catalog's description (its mnemonic in brackets where the description is "Unused").
XID_CATALOG: dict[int, XidInfo] = {
    8: _xid("RESTART_APP", "GPU stopped processing (the application's channel timed out)"),
    11: _xid("RESTART_APP", "Invalid or corrupted push buffer stream"),
    13: _xid(
        "RESTART_APP",
        "Graphics Engine Exception (usually the application: an illegal address or instruction)",
        "restart the application; run the GPU diagnostics if it repeats with different programs",
    ),
    14: _xid("IGNORE", "A fake or injected error from userspace (ROBUST_CHANNEL_FAKE_ERROR)"),
    25: _xid("RESTART_APP", "Invalid or illegal push buffer stream"),
    31: _xid(
        "RESTART_APP",
        "GPU memory page fault (usually the application accessing memory it did not map)",
        "restart the application; debug it if it repeats",
    ),
    32: _xid(
        "RESTART_APP",
        "Invalid or corrupted push buffer stream (a DMA controller fault: mostly the PCIe link's quality)",
        "restart the application; check the PCIe link if it repeats",
    ),
    37: _xid("IGNORE", "Driver firmware error (unimplemented firmware method)"),
    38: _xid("IGNORE", "Driver firmware error (firmware watchdog timeout)"),
    43: _xid(
        "IGNORE",
        "GPU stopped processing (the application's channel hit a fault and was stopped)",
        "restart the application; the GPU keeps serving others",
    ),
    44: _xid("IGNORE", "Graphics Engine fault during context switch"),
    45: _xid(
        "WORKFLOW_XID_45",
        "Preemptive cleanup, due to previous errors (the driver stopped the channels of a "
        "process that ended or faulted)",
    ),
    46: _xid("RESET_GPU", "GPU stopped processing (ROBUST_CHANNEL_GPU_TIMEOUT_ERROR: the GPU timed out)"),
    48: _xid("WORKFLOW_XID_48", "Double Bit ECC Error: an uncorrectable error in GPU memory"),
    54: _xid("CHECK_MECHANICALS", "Auxiliary power is not connected to the GPU board"),
    56: _xid("CONTACT_SUPPORT", "Unused on current GPUs (DISPLAY_CHANNEL_EXCEPTION)"),
    57: _xid(
        "CONTACT_SUPPORT", "Unused on current GPUs (FB_LINK_TRAINING_FAILURE_ERROR: memory link training)"
    ),
    58: _xid("CONTACT_SUPPORT", "Unused on current GPUs (FB_MEMORY_ERROR: GPU memory error)"),
    60: _xid("RESTART_APP", "Video processor exception (SEC2)"),
    61: _xid(
        "CONTACT_SUPPORT",
        "Internal micro-controller breakpoint/warning (PMU_BREAKPOINT, unused on current GPUs)",
    ),
    62: _xid("RESET_GPU", "Internal micro-controller halt"),
    # NVIDIA's bucket is IGNORE (the row is recorded); gpufleet blocks: the remap takes effect only at
    # the next GPU reset (the driver's line says "reset gpu to activate"), so the node waits for it.
    63: _xid(
        "IGNORE",
        "ECC page retirement or row remapping recording event: a row is marked for "
        "remapping, which takes effect at the next GPU reset",
        "reset the GPU to activate the remap",
        severity="block",
    ),
    64: _xid(
        "RESET_GPU",
        "ECC page retirement or row remapper recording failure: the remap could not be "
        "recorded (reserved rows exhausted)",
        "drain the node, reset the GPU and have it serviced (RMA) if it repeats",
    ),
    65: _xid("CONTACT_SUPPORT", "Unused on current GPUs (ROBUST_CHANNEL_NVENC1_ERROR: video encoder 1)"),
    66: _xid("IGNORE", "Illegal access by driver (register access violation)"),
    67: _xid("IGNORE", "Illegal access by driver (verification violation)"),
    68: _xid("RESTART_APP", "NVDEC0 Exception: video decoder error"),
    69: _xid("RESTART_APP", "Graphics Engine class error", "restart the application; debug it if it repeats"),
    73: _xid("CONTACT_SUPPORT", "Unused on current GPUs (ROBUST_CHANNEL_NVENC2_ERROR: video encoder 2)"),
    74: _xid(
        "WORKFLOW_NVLINK_ERR", "NVLink Error: a link between this GPU and another GPU or NVSwitch failed"
    ),
    78: _xid("UPDATE_SWFW", "vGPU Start Error"),
    79: _xid(
        "RESTART_BM",
        "GPU has fallen off the bus: the GPU no longer answers on PCIe",
        "drain the node and reboot it; check the slot, riser, power and the PCIe link; service if it repeats",
    ),
    80: _xid("RESTART_APP", "Corrupted data sent to GPU (push buffer CRC mismatch)"),
    81: _xid("CONTACT_SUPPORT", "Unused on current GPUs (ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR)"),
    86: _xid("RESTART_APP", "OFA Exception (optical flow accelerator)"),
    92: _xid(
        "IGNORE",
        "High single-bit ECC error rate",
        "watch the ECC counters and row remaps; service if they grow",
    ),
    93: _xid("IGNORE", "Non-fatal violation of provisioned InfoROM wear limit"),
    94: _xid(
        "RESTART_APP",
        "Contained ECC error: an uncorrectable memory error contained to the application that "
        "hit it; the GPU still serves",
        "restart the affected application; reset the GPU at the next drain to remap the row",
    ),
    95: _xid(
        "RESET_GPU",
        "Uncontained ECC error: an uncorrectable memory error that may have reached other applications",
        "drain the node and reset the GPU",
    ),
    106: _xid("IGNORE", "SMBPBI Test Message"),
    107: _xid("IGNORE", "SMBPBI Test Message Silent"),
    108: _xid("IGNORE", "NVLink remote translation error (unused)"),
    109: _xid("RESET_GPU", "Context Switch Timeout Error"),
    110: _xid(
        "RESET_GPU",
        "Security Fault Error (uncommon unless the hardware failed)",
        "drain the node, revert recent hardware changes and cold reset (power cycle) the system; "
        "contact the hardware vendor if it persists",
    ),
    119: _xid(
        "RESET_GPU",
        "GSP RPC timeout: the GPU System Processor stopped answering the driver",
        "drain the node and reset the GPU (power cycle the node if the error persists)",
    ),
    120: _xid(
        "RESET_GPU",
        "GSP error: the GPU System Processor reported an error",
        "drain the node and reset the GPU (power cycle the node if the error persists)",
    ),
    121: _xid("IGNORE", "C2C Error: corrected errors on the chip-to-chip link to the Grace CPU"),
    136: _xid("RESET_GPU", "Link Training Failed (ALI_TRAINING_FAIL: an NVLink link did not train)"),
    137: _xid("IGNORE", "NVLink Privilege Error (usually the application: an illegal peer-to-peer access)"),
    140: _xid(
        "RESET_GPU",
        "Unrecovered ECC error in GPU memory",
        "drain the node and reset the GPU; service if it repeats",
    ),
    141: _xid("IGNORE", "CUDA Fast Path Error"),
    142: _xid("CONTACT_SUPPORT", "NVENC3 Error (video encoder 3)"),
    143: _xid("RESET_GPU", "GPU Initialization Error"),
    144: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: SAW Error (NVLink5)"),
    145: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: RLW Error (NVLink5)"),
    146: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: TLW Error (NVLink5)"),
    147: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: TREX Error (NVLink5)"),
    148: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: NVLPW_CTRL Error (NVLink5)"),
    149: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: NETIR Error (NVLink5)"),
    150: _xid("WORKFLOW_NVLINK5_ERR", "NVLINK: MSE Error (NVLink5)"),
    151: _xid("RESTART_VM", "Key rotation Error (confidential computing)"),
    154: _xid(
        "XID_154",
        "GPU Recovery Action Changed: the driver names the recovery another Xid requires",
    ),
    155: _xid("RESET_GPU", "NVLINK: SW Defined Error (a link taken down on purpose, or put to sleep)"),
    156: _xid("RESET_GPU", "Resource Retirement Event"),
    157: _xid("IGNORE", "Resource Retirement Failure (no spare resources left for the repair)"),
    158: _xid("RESET_GPU", "GPU Fatal Timeout"),
    159: _xid("CHECK_UVM", "CHI Non-Data Error (on a chip-to-chip linked GPU)"),
    160: _xid("IGNORE", "Channel Retirement Event"),
    161: _xid("IGNORE", "Channel Retirement Failure"),
}
# The copy engines, video and JPEG decoders and optical flow: NVIDIA's RESTART_APP (the application's
# work on that engine failed; the GPU serves on).
_ENGINES: dict[int, str] = {
    **{n: "Copy Engine Exception" for n in (39, 40, 41)},
    **{n: "CE%d: Unknown Error" % (n - 67) for n in (70, 71, 72)},
    **{n: "CE%d: Unknown Error" % (n - 69) for n in (75, 76, 77)},
    85: "CE9: Unknown Error",
    **{n: "CE%d: Unknown Error" % (n - 116) for n in range(126, 136)},
    82: "NVJPG0 Error",
    83: "NVDEC1 Error",
    84: "NVDEC2 Error",
    88: "NVDEC3 Error",
    89: "NVDEC4 Error",
    **{n: "NVDEC%d Error" % (n - 91) for n in (96, 97, 98)},
    **{n: "NVJPG%d Error" % (n - 98) for n in range(99, 106)},
    139: "OFA1 Error",
}
XID_CATALOG.update({n: _xid("RESTART_APP", name) for n, name in _ENGINES.items()})

UNKNOWN = XidInfo(
    "block",
    "an Xid unknown to gpufleet's Xid catalog (%s)" % CATALOG_SOURCE,
    "look it up in NVIDIA's current Xid catalog and drain the node until its action is known",
    "UNKNOWN",
)


def describe(xid: int) -> XidInfo:
    """The catalog's entry for ``xid``, or UNKNOWN (blocks: fail closed) for one gpufleet does not list."""
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
    return _scan_log(text)[0]


@guard(ParseError, TOOL, complete=True)
def parse_kernel_events(text: str) -> dict[str, list[dict[str, Any]]]:
    """Kernel log text -> ``{xids: parse_kernel_log's events, sxids: [{sxid, device, pci_bus_id,
    severity, message, timestamp, line}]}``, one pass. An SXid's ``device`` is the switch as the
    driver names it (``nvidia-nvswitch0``), ``pci_bus_id`` its full bus id (``0000:05:00.0``, lower
    case), ``severity`` ``fatal`` or ``non-fatal`` as its line says, None on the lines that follow
    one (``Severity 1 Engine instance ...``, ``Data {...}``)."""
    xids, sxids = _scan_log(text)
    return {"xids": xids, "sxids": sxids}


def _scan_log(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    sxids: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find("NVRM: Xid")
        if at < 0:
            if "SXid (" in line:
                sxids.append(_sxid(line, number))
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
    return events, sxids


# ---------------------------------------------------------------- NVSwitch SXids

_SXID = re.compile(
    r"(nvidia-nvswitch[0-9]{1,3}): SXid \((?:PCI:)?("
    + _HEX
    + r"{4,8}:"
    + _HEX
    + r"{2}:"
    + _HEX
    + r"{2}\."
    + _HEX
    + r")\): ([0-9]{1,6}), (.*)$"
)
_SEVERITY = (("Fatal, ", "fatal"), ("Non-fatal, ", "non-fatal"))


def _sxid(line: str, number: int) -> dict[str, Any]:
    match = _SXID.search(line)
    if not match:
        raise ParseError(
            "%s: line %d names SXid but does not read as an NVSwitch SXid: %r" % (TOOL, number, line[:120])
        )
    if has_surrogates(line):
        raise ParseError("%s: line %d holds bytes that are not UTF-8" % (TOOL, number))
    device, bus_id, sxid, rest = match.groups()
    severity = None
    for prefix, name in _SEVERITY:
        if rest.startswith(prefix):
            severity, rest = name, rest[len(prefix) :]
    return {
        "sxid": int(sxid),
        "device": device,
        "pci_bus_id": bus_id.lower(),
        "severity": severity,
        "message": rest.strip(),
        "timestamp": _timestamp(line[: match.start()]),
        "line": number,
    }


class SxidInfo(NamedTuple):
    """severity: "block" or "warn"; meaning: NVIDIA's name of the SXid where gpufleet knows it."""

    severity: str
    meaning: str
    action: str


SXID_SOURCE = (
    "NVIDIA's Fabric Manager user guide (DU-09883-001), appendix D: the NVSwitch SXid errors, fatal and "
    "non-fatal"
)
# What gpufleet does with an SXid. It does not carry NVIDIA's whole SXid table: the nvswitch driver
# itself says in the line whether an SXid is fatal ("Fatal, " / "Non-fatal, "), and that is what is
# judged. A fatal SXid blocks: the Fabric Manager guide says a fatal NVSwitch error leaves the switch
# (and the NVLink traffic of every GPU through it) unusable until the GPUs and switches are reset,
# which on a bare-metal HGX node is a reboot. A non-fatal SXid warns: the guide says the switch
# corrected or contained it and work continues. An SXid whose lines never say which (only
# "Severity"/"Data" lines, a wrapped log) blocks, as an unknown Xid does: fail closed.
_SXID_ACTIONS = {
    "fatal": (
        "block",
        "drain the node and reboot it (a fatal NVSwitch error needs the GPUs and switches reset); "
        "check nvidia-smi -q -d FABRIC and nvidia-fabricmanager's log after it; contact support if it "
        "repeats",
    ),
    "non-fatal": (
        "warn",
        "none by itself: the switch contained it; watch for more, and for fatal SXids or Xid 74 beside it",
    ),
    None: (
        "block",
        "read the SXid's first line in the kernel log (it says Fatal or Non-fatal); drain the node until "
        "it is known",
    ),
}
# The SXids gpufleet names (their meaning only; the severity is the driver's word, above), from the
# source's appendix as leptonai/gpud's sxid catalog quotes it.
SXID_NAMES: dict[int, str] = {
    12028: "egress non-posted PRIV error",
    20034: "LTSSM Fault Up: an NVLink link of the switch went down from active",
}


def describe_sxid(sxid: int, severity: str | None) -> SxidInfo:
    """What gpufleet does with ``sxid`` of ``severity`` (fatal, non-fatal or None: not said)."""
    rule, action = _SXID_ACTIONS[severity]
    meaning = SXID_NAMES.get(sxid, "an SXid gpufleet does not name (see %s)" % SXID_SOURCE)
    return SxidInfo(rule, meaning, action)
