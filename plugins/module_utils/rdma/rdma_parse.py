# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for NVIDIA (Mellanox) RDMA NICs' tools: text in, plain data out.

Parsers take what a tool printed (ibdev2netdev, mlnx_qos, mlxlink, mlxconfig, ibstat,
ibstatus, show_gids, ethtool -i, cma_roce_mode) and return dicts and lists of
str/int/float/bool/None. A value the tool prints as ``N/A`` is None. Output that is
empty, truncated or not in the tool's format raises ParseError, whose message names the
tool and what was missing; no other exception escapes a parser.

The sysfs readers are rdma_read.py's; they raise this module's ParseError too.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import (
    decimal,
    guard,
    hexadecimal,
    quote,
    whole,
)

Func = TypeVar("Func", bound=Callable[..., Any])


class ParseError(ValueError):
    """Raised when tool output or a sysfs file is empty, truncated or not in the expected format."""


# The longest line these tools print is under 200 characters (an mlxlink cable speed list, an
# ibdev2netdev -v adapter description): a longer one is damage, refused before any regex reads it.
MAX_LINE = 1024

# Link layers the kernel names (drivers/infiniband/core/sysfs.c link_layer_show).
LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")
# NVIDIA/Mellanox firmware versions are <major>.<minor>.<subminor> (36.2014.1676); other vendors
# add a fourth part. A cut value ('3', '36.2014.') matches neither.
_FIRMWARE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?")


def _guard(tool: str, allow_empty: bool = False, complete: bool = False) -> Callable[[Func], Func]:
    """parsing.guard with this module's ParseError; ``complete``: the tool ends every line with a
    newline, so output without one was cut (perhaps inside a value: 'No iss', '0000:e6:00')."""
    return guard(ParseError, tool, allow_empty, complete=complete, max_line=MAX_LINE)


def _link_layer(value: str, where: str) -> str:
    """A whole link layer name ('Ether' is a cut 'Ethernet', not a link layer)."""
    if value not in LINK_LAYERS:
        raise ParseError("%s: link layer %s is not one of %s" % (where, quote(value), ", ".join(LINK_LAYERS)))
    return value


def _firmware(value: str | None, where: str) -> str | None:
    """A whole firmware version, or None when the tool printed none."""
    if value is None or value == "":
        return value
    if not _FIRMWARE.fullmatch(value):
        raise ParseError(
            "%s: firmware version %s is not <major>.<minor>.<sub> (cut short?)" % (where, quote(value))
        )
    return value


def _lines(text: str) -> list[str]:
    """The tool's lines, stripped, blank ones left out (they separate blocks, saying nothing)."""
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def _na(value: str) -> str | None:
    value = value.strip()
    return None if value in ("", "N/A", "NA") else value


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# ------------------------------------------------------------------ link speeds

# Per-lane signalling rate in deci-Gb/s, as drivers/infiniband/core/sysfs.c rate_show
# counts them (FDR is 14 per lane, so 4X FDR prints 56).
_IB_LANE_DECI = {
    "SDR": 25,
    "DDR": 50,
    "QDR": 100,
    "FDR10": 100,
    "FDR": 140,
    "EDR": 250,
    "HDR": 500,
    "NDR": 1000,
    "XDR": 2000,
}

# The kernel's port rate text: "%d%s Gb/sec (%dX%s)" (sysfs.c rate_show), e.g.
# "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)"; pre-4.x kernels print "10 Gb/sec (4X)".
_RATE = re.compile(r"^(\d+(?:\.5)?) Gb/sec \((\d+)X(?: ([A-Z0-9]+))?\)$")


def _rate(text: str, where: str) -> dict[str, Any]:
    try:
        return parse_ib_rate(text)
    except ParseError as exc:
        raise ParseError("%s: %s" % (where, exc)) from None


def parse_ib_rate(text: str) -> dict[str, Any]:
    """'400 Gb/sec (4X NDR)' -> {'rate_gbps': 400, 'width': 4, 'speed': 'NDR'}."""
    match = _RATE.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ParseError("ib rate: %r is not '<N> Gb/sec (<W>X <SPEED>)'" % (text,))
    return {
        "rate_gbps": _number(float(match.group(1))),
        "width": int(match.group(2)),
        "speed": match.group(3) or "SDR",
    }


# ------------------------------------------------------------------ ibdev2netdev

# `ibdev2netdev` (mlnx-tools ofed_scripts/ibdev2netdev): "$d port $port ==> $eth ($link_state)".
_IBDEV2NETDEV = re.compile(r"^(\S+) port (\d+) ==> (\S+) \((Up|Down|NA)\)$")
# `ibdev2netdev -v`: "$pdev $d ($devid - $partid) $devdesc fw $fwver port $port ($ibstate) ==> $eth ($state)"
# where partid, devdesc and ibstate are printf-padded.
_IBDEV2NETDEV_V = re.compile(
    r"^(?:(\S+) )?(\S+) \((\S+) - (\S+)\s*\)\s*(.*?)\s*fw (\S+) "
    r"port (\d+) \((\S+)\s*\) ==> (\S+) \((Up|Down|NA)\)$"
)


@_guard("ibdev2netdev", allow_empty=True)
def parse_ibdev2netdev(text: str) -> list[dict[str, Any]]:
    """One entry per RDMA port: ibdev, port, netdev, up (None when the tool says NA).

    Plain and ``-v`` output are both accepted; ``-v`` adds pci_bus_id, hca_type,
    part_number, description, fw_version and port_state. Empty output means no
    Mellanox netdevs (the tool prints nothing then).
    """
    entries: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        match = _IBDEV2NETDEV.match(line)
        if match:
            ibdev, port, netdev, link = match.groups()
            entry: dict[str, Any] = {"ibdev": ibdev, "port": int(port), "netdev": netdev}
        else:
            verbose = _IBDEV2NETDEV_V.match(line)
            if not verbose:
                raise ParseError(
                    "ibdev2netdev: line %s is not '<ibdev> port <n> ==> <netdev> (Up|Down)'" % quote(line)
                )
            pdev, ibdev, devid, partid, desc, fw, port, ibstate, netdev, link = verbose.groups()
            entry = {
                "ibdev": ibdev,
                "port": int(port),
                "netdev": netdev,
                "pci_bus_id": pdev or None,
                "hca_type": _na(devid),
                "part_number": _na(partid),
                "description": desc or None,
                "fw_version": _firmware(_na(fw), "ibdev2netdev %s" % ibdev),
                "port_state": _na(ibstate),
            }
        entry["up"] = {"Up": True, "Down": False}.get(link)
        entries.append(entry)
    return entries


# ------------------------------------------------------------------ mlnx_qos

# Lines mlnx_qos prints (mlnx-tools python/mlnx_qos) when a feature is missing; kept as warnings.
_QOS_NOTICES = (
    "Priority trust state is not supported on your system",
    "Buffers commands are not supported on your system",
    "Rate limit is not supported on your system!",
)
_QOS_TC = re.compile(
    r"^tc: (\d+) ratelimit: (unlimited|[\d.]+ Gbps), tsa: (ets|strict|vendor|unknown)(?:, bw: (\d+)%)?$"
)
_QOS_DSCP = re.compile(r"^prio:([0-7]) dscp:((?:\d{1,2},)*\d{0,2})$")


def _qos_row(fields: list[str], name: str, top: int) -> list[int]:
    values = [whole(v, "PFC '%s' value" % name) for v in fields[1:]]
    if len(values) != 8 or any(v < 0 or v > top for v in values):
        raise ParseError(
            "mlnx_qos: PFC '%s' row needs 8 values 0..%d, got %r" % (name, top, " ".join(fields[1:]))
        )
    return values


@_guard("mlnx_qos")
def parse_mlnx_qos(text: str) -> dict[str, Any]:
    """`mlnx_qos -i <if>`: trust, PFC per priority, DSCP map, buffers, TCs.

    Accepts the current layout (DCBX mode, trust, dscp2prio, default priority,
    receive buffers, PFC enabled/buffer rows, ``tc:`` blocks) and the older ones
    (no trust line, no buffers, ``up:``/``skprio:`` lines under a TC, blank lines).
    ``pfc`` is 8 ints (0/1) for priorities 0..7; ``trust`` is None when not printed.
    """
    qos: dict[str, Any] = {
        "dcbx_mode": None,
        "trust": None,
        "dscp2prio": {},
        "default_priority": None,
        "receive_buffer_size": None,
        "receive_buffer_total": None,
        "cable_len": None,
        "pfc": None,
        "pfc_enabled": [],
        "prio2buffer": None,
        "tc": {},
        "prio_tc": {},
        "warnings": [],
    }
    section = None
    tc_number = None
    seen_priority_row = False
    for line in _lines(text):
        if line.startswith("DCBX mode:"):
            qos["dcbx_mode"] = _na(line.split(":", 1)[1])
        elif line.startswith("Priority trust state:"):
            qos["trust"] = _na(line.split(":", 1)[1])
        elif line == "dscp2prio mapping:":
            section = "dscp2prio"
        elif line == "default priority:":
            section = "default"
        elif line.startswith("Receive buffer size (bytes):"):
            items = [i.strip() for i in line.split(":", 1)[1].split(",") if i.strip()]
            sizes = [whole(i, "receive buffer size") for i in items if "=" not in i]
            if len(sizes) != 8:
                raise ParseError("mlnx_qos: 'Receive buffer size' needs 8 sizes, got %d" % len(sizes))
            qos["receive_buffer_size"] = sizes
            for item in items:
                if "=" in item:  # max_buffer_size= (OFED 23.x) or total_size= (mlnx-tools)
                    qos["receive_buffer_total"] = whole(item.split("=", 1)[1], "receive buffer total")
        elif line.startswith("Cable len:"):
            qos["cable_len"] = whole(line.split(":", 1)[1].strip(), "cable length")
        elif line == "PFC configuration:":
            section = "pfc"
        elif line.startswith("tc:"):
            match = _QOS_TC.match(line)
            if not match:
                raise ParseError(
                    "mlnx_qos: TC line %s is not 'tc: N ratelimit: R, tsa: T[, bw: B%%]'" % quote(line)
                )
            number, rate, tsa, bw = match.groups()
            tc_number = int(number)
            qos["tc"][tc_number] = {
                "ratelimit_gbps": None
                if rate == "unlimited"
                else _number(decimal(rate.split()[0], "rate limit")),
                "tsa": tsa,
                "bw_pct": int(bw) if bw is not None else None,
                "priorities": [],
            }
            section = "tc"
        elif section == "dscp2prio" and (match := _QOS_DSCP.match(line)):
            for dscp in (int(d) for d in match.group(2).split(",") if d):
                if dscp > 63 or dscp in qos["dscp2prio"]:
                    raise ParseError("mlnx_qos: dscp2prio maps DSCP %d twice or out of range" % dscp)
                qos["dscp2prio"][dscp] = int(match.group(1))
        elif section == "default" and re.match(r"^prio:([0-7])$", line):
            qos["default_priority"] = int(line.split(":", 1)[1])
        elif section == "pfc" and line.split()[0].rstrip(":") == "priority":
            if line.split()[1:] != [str(p) for p in range(8)]:
                raise ParseError("mlnx_qos: PFC header row %s is not 'priority 0 1 .. 7'" % quote(line))
            seen_priority_row = True
        elif section == "pfc" and line.split()[0].rstrip(":") == "enabled":
            qos["pfc"] = _qos_row(line.split(), "enabled", 1)
        elif section == "pfc" and line.split()[0] == "buffer":
            qos["prio2buffer"] = _qos_row(line.split(), "buffer", 7)
        elif section == "tc" and tc_number is not None and re.match(r"^(priority|up):\s+[0-7]$", line):
            prio = int(line.split(":", 1)[1])
            qos["tc"][tc_number]["priorities"].append(prio)
            qos["prio_tc"][prio] = tc_number
        elif section == "tc" and line.startswith("skprio:"):
            continue  # old kernels list socket priorities under each UP; not a setting
        elif line in _QOS_NOTICES or line.startswith("****** WARNING"):
            qos["warnings"].append(line)
        else:
            raise ParseError("mlnx_qos: unexpected line %s" % quote(line))
    if qos["pfc"] is None or not seen_priority_row:
        raise ParseError("mlnx_qos: no 'PFC configuration' priority/enabled rows (output truncated?)")
    qos["pfc_enabled"] = [prio for prio, on in enumerate(qos["pfc"]) if on]
    return qos


# ------------------------------------------------------------------ mlxlink

_MLXLINK_KV = re.compile(r"^(\S.*?)\s*:\s?(.*)$")
_MLXLINK_MASK = re.compile(r"^(0x[0-9a-fA-F]+) \((.*)\)$")


def _mlxlink_sections(text: str) -> dict[str, dict[str, str]]:
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or re.fullmatch(r"-{3,}", stripped):
            continue
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if re.fullmatch(r"-{3,}", following) and ":" not in stripped:
            current = sections.setdefault(stripped, {})
            continue
        if stripped.startswith("-E-"):
            raise ParseError("mlxlink: %s" % stripped)
        if stripped.startswith(("-W-", "-I-")):
            continue
        match = _MLXLINK_KV.match(stripped)
        if current is None or not match:
            raise ParseError(
                "mlxlink: line %s is outside a 'Key : Value' section (output truncated?)" % quote(stripped)
            )
        current[match.group(1).strip()] = match.group(2).strip()
    return sections


def _link_mask(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    match = _MLXLINK_MASK.match(value)
    if not match:
        raise ParseError("mlxlink: speed mask %r is not '0x<hex> (<speeds>)'" % value)
    return {"mask": int(match.group(1), 16), "speeds": [s for s in match.group(2).split(",") if s]}


def _mlxlink_speed_gbps(speed: str | None, lanes: int | None) -> int | float | None:
    if speed is None:
        return None
    ethernet = re.fullmatch(r"(\d+(?:\.\d+)?)([GM])(?:_\d+X)?", speed)
    if ethernet:
        value = float(ethernet.group(1))
        return _number(value if ethernet.group(2) == "G" else value / 1000)
    signalling = speed.rsplit("-", 1)[-1]  # IB-NDR, NVLink-XDR
    if signalling in _IB_LANE_DECI and lanes:
        return _number(_IB_LANE_DECI[signalling] * lanes / 10)
    return None


@_guard("mlxlink", complete=True)
def parse_mlxlink(text: str) -> dict[str, Any]:
    """`mlxlink -d <dev> [--show_module]`: operational state, speed, FEC, troubleshooting, versions.

    ``speed_gbps`` is derived from Speed and Width (``400G`` -> 400; ``IB-NDR`` x4 -> 400).
    ``module`` is the raw "Module Info" section (``--show_module``), else None;
    ``sections`` holds every section as printed (values stripped).
    """
    sections = _mlxlink_sections(text)
    oper = sections.get("Operational Info")
    if not oper or "State" not in oper:
        raise ParseError("mlxlink: no 'Operational Info' section with a State (output truncated?)")
    supported = sections.get("Supported Info", {})
    trouble = sections.get("Troubleshooting Info", {})
    tool = sections.get("Tool Information", {})
    width = _na(oper.get("Width", ""))
    lanes = whole(width[:-1], "width") if width and width[-1:] in ("x", "X") else None
    if width and lanes is None:
        raise ParseError("mlxlink: width %s is not '<lanes>x'" % quote(width))
    speed = _na(oper.get("Speed", ""))
    opcode = _na(trouble.get("Status Opcode", ""))
    mft = _na(tool.get("MFT Version", ""))
    return {
        "state": _na(oper["State"]),
        "physical_state": _na(oper.get("Physical state", "")),
        "speed": speed,
        "speed_gbps": _mlxlink_speed_gbps(speed, lanes),
        "width": width,
        "lanes": lanes,
        "fec": _na(oper.get("FEC", "")),
        "loopback": _na(oper.get("Loopback Mode", "")),
        "auto_negotiation": _na(oper.get("Auto Negotiation", "")),
        "enabled_link_speed": _link_mask(
            _na(supported.get("Enabled Link Speed", supported.get("Enabled Link Speed (Ext.)", "")))
        ),
        "supported_cable_speed": _link_mask(
            _na(supported.get("Supported Cable Speed", supported.get("Supported Cable Speed (Ext.)", "")))
        ),
        "status_opcode": None if opcode is None else whole(opcode, "status opcode"),
        "group_opcode": _na(trouble.get("Group Opcode", "")),
        "recommendation": _na(trouble.get("Recommendation", "")),
        "firmware_version": _firmware(_na(tool.get("Firmware Version", "")), "mlxlink"),
        "amber_version": _na(tool.get("amBER Version", "")),
        "mft_version": mft[4:] if mft and mft.startswith("mft ") else mft,
        "module": sections.get("Module Info"),
        "sections": sections,
    }


# ------------------------------------------------------------------ mlxconfig

_MLXCONFIG_COLUMNS = {"Default": "default", "Current": "current", "Next Boot": "next_boot", "New": "new"}
_MLXCONFIG_HEADER = {
    "Device type": "device_type",
    "Name": "name",
    "Description": "description",
    "Device": "device",
}


def _mlxconfig_blocks(text: str, tool: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Device blocks (header fields and the Configurations table) and the lines after them."""
    devices: list[dict[str, Any]] = []
    trailer: list[str] = []
    device: dict[str, Any] | None = None
    in_table = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(r"-+", line):
            continue
        if line.startswith("-E-"):
            raise ParseError("%s: %s" % (tool, line))
        match = re.match(r"^Device #(\d+):$", line)
        if match:
            device = {"index": int(match.group(1)), "columns": [], "params": {}}
            device.update(dict.fromkeys(_MLXCONFIG_HEADER.values()))
            devices.append(device)
            in_table = False
        elif device is None or line.startswith(("Apply new Configuration?", "Applying...", "-I-", "-W-")):
            trailer.append(line)
        elif line.startswith("Configurations:"):
            # Older mlxconfig prints no column names: its single column is the next-boot value.
            names = (
                re.split(r"\s{2,}", line[len("Configurations:") :].strip())
                if line != "Configurations:"
                else []
            )
            device["columns"] = [_MLXCONFIG_COLUMNS[name] for name in names] or ["next_boot"]
            in_table = True
        elif not in_table:
            key, sep, value = line.partition(":")
            if not sep or key.strip() not in _MLXCONFIG_HEADER:
                raise ParseError("%s: unexpected device header line %s" % (tool, quote(line)))
            device[_MLXCONFIG_HEADER[key.strip()]] = value.strip() or None
        elif line.startswith("The '*'"):
            continue  # -e legend: '*' marks values that differ from the default
        else:
            fields = line.lstrip("*").split()
            if len(fields) != len(device["columns"]) + 1 or not re.fullmatch(r"[A-Z0-9_.\[\]]+", fields[0]):
                raise ParseError(
                    "%s: configuration row %r does not have %d value(s) (output truncated?)"
                    % (tool, line, len(device["columns"]))
                )
            entry = dict(zip(device["columns"], fields[1:], strict=True))
            if line.startswith("*"):
                entry["modified"] = True
            device["params"][fields[0]] = entry
    if not devices:
        raise ParseError("%s: no 'Device #N:' block" % tool)
    for device in devices:
        if not device["columns"]:
            raise ParseError(
                "%s: device %d has no Configurations table (output truncated?)" % (tool, device["index"])
            )
    return devices, trailer


@_guard("mlxconfig")
def parse_mlxconfig_query(text: str) -> list[dict[str, Any]]:
    """`mlxconfig -d <dev> q [PARAM...]` (also mstconfig): one dict per 'Device #N' block.

    Each has device_type, name, description, device, columns (``next_boot``, or
    ``default``/``current``/``next_boot`` with ``-e``) and params
    ``{PARAM: {column: raw value}}``, e.g. ``{"LINK_TYPE_P1": {"next_boot": "ETH(2)"}}``;
    see mlxconfig_value for the name/number in a raw value.
    """
    devices, _trailer = _mlxconfig_blocks(text, "mlxconfig")
    return devices


@_guard("mlxconfig")
def parse_mlxconfig_set(text: str) -> dict[str, Any]:
    """`mlxconfig [-y] -d <dev> set P=V...`: the changes shown, whether they were applied.

    Returns devices (as parse_mlxconfig_query, params with ``next_boot`` and ``new``),
    applied (``Applying... Done!``), reboot_required (``-I- Please reboot``) and answer
    (``y``/``n`` or None when no prompt was shown).
    """
    devices, trailer = _mlxconfig_blocks(text, "mlxconfig")
    if any("new" not in device["columns"] for device in devices):
        raise ParseError("mlxconfig: set output has no 'New' column")
    answer = None
    for line in trailer:
        if line.startswith("Apply new Configuration?"):
            answer = line.rsplit(":", 1)[1].strip() or None
    return {
        "devices": devices,
        "answer": answer,
        "applied": any(line.startswith("Applying... Done") for line in trailer),
        "reboot_required": any("Please reboot" in line for line in trailer),
    }


def mlxconfig_value(raw: str) -> tuple[str, int | None]:
    """'ETH(2)' -> ('ETH', 2); '48' -> ('48', 48); 'Array[0..7]' -> ('Array[0..7]', None)."""
    match = re.fullmatch(r"(.+)\((\d+)\)", raw)
    if match:
        return match.group(1), int(match.group(2))
    return raw, int(raw) if raw.isdigit() else None


# ------------------------------------------------------------------ ibstat / ibstatus

_IBSTAT_CA = {
    "CA type": "ca_type",
    "Number of ports": "num_ports",
    "Firmware version": "firmware_version",
    "Hardware version": "hardware_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_IBSTAT_PORT = {
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate_gbps",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}
_IBSTAT_INTS = ("num_ports", "base_lid", "lmc", "sm_lid")


@_guard("ibstat")
def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """`ibstat`: one dict per CA with its fields and ``ports`` (a list, each with ``port``)."""
    cas: list[dict[str, Any]] = []
    port: dict[str, Any] | None = None
    for line in _lines(text):
        match = re.match(r"^CA '([^']+)'$", line)
        if match:
            cas.append({"ca": match.group(1), "ports": []})
            port = None
            continue
        match = re.match(r"^Port (\d+):$", line)
        if cas and match:
            port = {"port": int(match.group(1))}
            cas[-1]["ports"].append(port)
            continue
        key, sep, value = line.partition(":")
        table = _IBSTAT_PORT if port is not None else _IBSTAT_CA
        if not cas or not sep or key not in table:
            raise ParseError("ibstat: unexpected line %s" % quote(line))
        name = table[key]
        value = value.strip()
        target: dict[str, Any] = port if port is not None else cas[-1]
        if name in _IBSTAT_INTS:
            target[name] = whole(value, key)
        elif name == "rate_gbps":
            target[name] = _number(decimal(value, key))
        elif name == "link_layer":
            target[name] = _link_layer(value, "ibstat")
        elif name == "firmware_version":
            target[name] = _firmware(value, "ibstat %s" % cas[-1]["ca"])
        else:
            target[name] = value
    if not cas:
        raise ParseError("ibstat: no \"CA '<name>'\" block")
    for ca in cas:
        if ca.get("num_ports") != len(ca["ports"]):
            raise ParseError(
                "ibstat: CA %s lists %s port(s) but describes %d (output truncated?)"
                % (ca["ca"], ca.get("num_ports"), len(ca["ports"]))
            )
        for port in ca["ports"]:
            _require_fields("ibstat", ca["ca"], port, ("state", "physical_state", "rate_gbps", "link_layer"))
    return cas


def _require_fields(tool: str, ca: str, port: dict[str, Any], keys: tuple[str, ...]) -> None:
    """A port block that lacks one of ``keys`` is a truncated output, never a port without a link."""
    missing = [key for key in keys if key not in port]
    if missing:
        raise ParseError(
            "%s: %s port %d has no %s (output truncated?)" % (tool, ca, port["port"], ", ".join(missing))
        )


_CODED = re.compile(r"^(\d+): (.+)$")


def _coded(value: str, what: str) -> tuple[int, str]:
    match = _CODED.match(value.strip())
    if not match:
        raise ParseError("%s: %r is not '<code>: <name>'" % (what, value))
    return int(match.group(1)), match.group(2)


@_guard("ibstatus")
def parse_ibstatus(text: str) -> list[dict[str, Any]]:
    """`ibstatus`: one dict per device port (the kernel's sysfs port files, formatted)."""
    ports: list[dict[str, Any]] = []
    for line in _lines(text):
        match = re.match(r"^Infiniband device '([^']+)' port (\d+) status:$", line)
        if match:
            ports.append({"ca": match.group(1), "port": int(match.group(2))})
            continue
        key, sep, value = line.partition(":")
        if not ports or not sep:
            raise ParseError("ibstatus: unexpected line %s" % quote(line))
        entry, value = ports[-1], value.strip()
        if key == "default gid":
            entry["default_gid"] = None if value == "unknown" else value
        elif key in ("base lid", "sm lid"):
            entry[key.replace(" ", "_")] = hexadecimal(value, key)
        elif key == "state":
            entry["state_code"], entry["state"] = _coded(value, "ibstatus state")
        elif key == "phys state":
            entry["phys_state_code"], entry["phys_state"] = _coded(value, "ibstatus phys state")
        elif key == "rate":
            entry["rate"] = value
            entry.update(_rate(value, "ibstatus"))
        elif key == "link_layer":
            entry["link_layer"] = _link_layer(value, "ibstatus")
        else:
            raise ParseError("ibstatus: unexpected field %s" % quote(key))
    if not ports:
        raise ParseError("ibstatus: no \"Infiniband device '<name>' port <n> status:\" block")
    for entry in ports:
        _require_fields("ibstatus", entry["ca"], entry, ("state", "phys_state", "rate", "link_layer"))
    return ports


# ------------------------------------------------------------------ show_gids

_GID = re.compile(r"^[0-9a-f]{4}(?::[0-9a-f]{4}){7}$")


@_guard("show_gids")
def parse_show_gids(text: str) -> list[dict[str, Any]]:
    """`show_gids [dev]` (mlnx-tools): one dict per non-empty GID, checked against n_gids_found."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines[0].split() or lines[0].split()[:4] != ["DEV", "PORT", "INDEX", "GID"]:
        raise ParseError("show_gids: no 'DEV PORT INDEX GID' header")
    gids: list[dict[str, Any]] = []
    count = None
    for line in lines[1:]:
        if line.startswith("---"):
            continue
        if line.startswith("n_gids_found="):
            count = whole(line.split("=", 1)[1].strip(), "n_gids_found")
            break
        fields = line.split("\t")
        if len(fields) < 6 or not _GID.match(fields[3].strip()):
            raise ParseError("show_gids: row %s is not DEV PORT INDEX GID [IPv4] VER DEV" % quote(line))
        middle = [f.strip() for f in fields[4:-2] if f.strip()]
        gids.append(
            {
                "dev": fields[0].strip(),
                "port": whole(fields[1].strip(), "port"),
                "index": whole(fields[2].strip(), "index"),
                "gid": fields[3].strip(),
                "ipv4": middle[0] if middle else None,
                "ver": fields[-2].strip() or None,
                "netdev": fields[-1].strip() or None,
            }
        )
    if count is None:
        raise ParseError("show_gids: no n_gids_found line (output truncated?)")
    if count != len(gids):
        raise ParseError("show_gids: n_gids_found=%d but %d GID rows" % (count, len(gids)))
    return gids


# ------------------------------------------------------------------ ethtool -i, cma_roce_mode


# A PCI device's bus-info, as ethtool -i prints it for a PCI NIC: <domain>:<bus>:<device>.<function>.
_PCI_BUS_INFO = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


@_guard("ethtool -i", complete=True)
def parse_ethtool_info(text: str) -> dict[str, Any]:
    """`ethtool -i <if>`: driver, version, firmware version and PSID, bus-info, feature flags.

    An NVIDIA/Mellanox NIC's (driver mlx*) firmware must be a whole version and its bus-info a whole
    PCI address: a cut one ('0000:e6:00') names no device."""
    info: dict[str, Any] = {}
    for raw in text.splitlines():
        if not raw.strip():
            continue
        key, sep, value = raw.partition(":")
        if not sep:
            raise ParseError("ethtool -i: line %s is not 'key: value'" % quote(raw))
        info[key.strip().replace("-", "_")] = value.strip() or None
    if "driver" not in info:
        raise ParseError("ethtool -i: no 'driver:' line")
    firmware = info.get("firmware_version") or ""
    match = re.fullmatch(r"(\S+) \((\S+)\)", firmware)
    info["fw_version"], info["psid"] = match.groups() if match else (firmware or None, None)
    if str(info["driver"]).startswith("mlx"):
        # NVIDIA/Mellanox NICs print '<version> (<PSID>)'; other drivers print what they like
        _firmware(info["fw_version"], "ethtool -i")
        bus = info.get("bus_info")
        if bus is not None and not _PCI_BUS_INFO.fullmatch(bus):
            raise ParseError(
                "ethtool -i: bus-info %s is not a PCI address <domain>:<bus>:<device>.<function> (cut short?)"
                % quote(bus)
            )
    return info


# `ethtool -a <if>` (ethtool's pause report, ioctl and netlink alike): "Autonegotiate:\ton",
# "RX:\t\ton", "TX:\t\ton"; netlink ethtool adds "RX negotiated:"/"TX negotiated:" lines when
# autonegotiation is on, and "Statistics:" with -I.
_PAUSE_KEYS = {"Autonegotiate": "autoneg", "RX": "rx", "TX": "tx"}


@_guard("ethtool -a")
def parse_ethtool_pause(text: str) -> dict[str, Any]:
    """`ethtool -a <if>`: IEEE 802.3x global pause, {'autoneg', 'rx', 'tx'} as bools."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines[0].startswith("Pause parameters for "):
        raise ParseError("ethtool -a: no 'Pause parameters for <if>:' line (%s)" % quote(lines[0]))
    pause: dict[str, Any] = {}
    for line in lines[1:]:
        if line.startswith("Cannot get") or line.startswith("netlink error"):
            raise ParseError("ethtool -a: %s" % line)
        key, sep, value = line.partition(":")
        if key.strip() in _PAUSE_KEYS and sep:
            if value.strip() not in ("on", "off"):
                raise ParseError("ethtool -a: %s is %r, not on or off" % (key.strip(), value.strip()))
            pause[_PAUSE_KEYS[key.strip()]] = value.strip() == "on"
        elif line == "Statistics:":
            break
    missing = [key for key in ("autoneg", "rx", "tx") if key not in pause]
    if missing:
        raise ParseError("ethtool -a: no %s line (output truncated?)" % "/".join(missing))
    return pause


# The kernel's names for the RDMA CM default GID type (cma_configfs.c / ib_cache_gid_type_str).
_ROCE_MODES = {"IB/RoCE v1": "v1", "RoCE v2": "v2"}


def roce_mode_name(text: str) -> str:
    """'RoCE v2' -> 'v2', 'IB/RoCE v1' -> 'v1' (the kernel's default_roce_mode strings)."""
    value = text.strip() if isinstance(text, str) else ""
    if value not in _ROCE_MODES:
        raise ParseError("roce mode: %r is not 'RoCE v2' or 'IB/RoCE v1'" % (text,))
    return _ROCE_MODES[value]


@_guard("cma_roce_mode")
def parse_cma_roce_mode(text: str) -> str:
    """`cma_roce_mode -d <dev> -p <port> [-m 1|2]` prints the mode it left set; returns 'v1' or 'v2'."""
    last = [line.strip() for line in text.splitlines() if line.strip()][-1]
    if last not in _ROCE_MODES:
        raise ParseError("cma_roce_mode: %s is not 'RoCE v2' or 'IB/RoCE v1'" % quote(last))
    return _ROCE_MODES[last]
