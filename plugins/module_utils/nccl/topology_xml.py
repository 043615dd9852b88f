# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL topology XML (``<system version="1">``): build it from a node, render, parse, compare.

The file is what NCCL itself writes with NCCL_TOPO_DUMP_FILE, and what it reads back with
NCCL_TOPO_FILE: ``<cpu>`` per NUMA node, the PCI tree under it (switch upstream ports, then
endpoints, children ordered by bus ID), ``<gpu>`` with its ``<nvlink>`` edges, and ``<nic>``
holding one ``<net>`` per RDMA device. Element and attribute names and value formats follow
NCCL's src/graph/xml.cc and the real dumps in tests/fixtures/real/nccl-topo (IBM Cloud H100,
Azure ND, AWS p4d).

Pure functions (text or data in, data out) come first; ``read_node`` at the end is the one
that reads a node's /sys, and takes the sysfs root as an argument so tests can point it at a
tree of their own. Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from xml.sax.saxutils import quoteattr

from ansible_collections.gpufleet.node.plugins.module_utils.core import boot_files, parsing, results

TOPO_VERSION = "1"
# What NCCL writes for an NVLink whose far end is an NVSwitch it cannot see over PCI.
NVSWITCH_TARGET = "fffffff:ffff:ff"
CLASS_NVSWITCH = "0x068000"
# NCCL's <net> values for an mlx5 port: max_qp of the device, and its fixed latency field.
NET_MAXCONN = 131072
NET_LATENCY = "0.000000"
HEADER = (
    "<!-- Managed by gpufleet (gpufleet.node.nccl_topology) from this node's PCI, NUMA, GPU and "
    "NIC discovery, for NCCL_TOPO_FILE. Rewritten when the node changes; do not edit. -->"
)

_CPU_ATTRS = ("numaid", "affinity", "arch", "vendor", "familyid", "modelid")
_PCI_ATTRS = (
    "busid",
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "link_speed",
    "link_width",
)
_GPU_ATTRS = ("dev", "sm", "rank", "gdr")
_NVLINK_ATTRS = ("target", "count", "tclass")
_NET_ATTRS = ("name", "dev", "speed", "port", "latency", "guid", "maxconn", "gdr")
# What parse's errors start with (the file's format, as a tool's name starts a parser's error).
TOOL = "NCCL topology"
# NCCL's dumps nest <pci> a few switch levels deep; far deeper is not a topology NCCL wrote.
MAX_PCI_DEPTH = 64


class TopologyError(ValueError):
    """A file that is not an NCCL topology, or a node that cannot be described as one."""


# ---------------------------------------------------------------- values


def normalize_bus_id(text):
    """'00000000:A4:00.0' (nvidia-smi) or '0000:a4:00.0' (sysfs) -> '0000:a4:00.0' (NCCL)."""
    value = str(text).strip().lower()
    match = re.match(r"^([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])$", value)
    if not match:
        return value
    domain, bus, device, function = match.groups()
    return "%04x:%s:%s.%s" % (int(domain, 16), bus, device, function)


def is_bdf(name):
    """NCCL's checkBDFFormat: exactly 'DDDD:BB:dd.f' in hex."""
    return re.match(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$", name) is not None


def parse_cpulist(text):
    """'0-55,112-167' -> [0, ..., 55, 112, ..., 167]; '' -> []."""
    cpus = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, _dash, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def cpumask(cpus, width):
    """The kernel's cpumap format: 32-bit hex groups, most significant first, width bits in all."""
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    groups = max((max(width, 1) + 31) // 32, 1)
    text = "%0*x" % (groups * 8, mask)
    return ",".join(text[i : i + 8] for i in range(0, len(text), 8))


def parse_cpuinfo(text):
    """vendor_id, cpu family and model of the first processor in /proc/cpuinfo (as CPUID reports)."""
    found = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if found:
                break  # end of the first processor block
            continue
        found.setdefault(key.strip().lower(), value.strip())
    family, model = found.get("cpu family"), found.get("model")
    return {
        "vendor": found.get("vendor_id"),
        "familyid": int(family) if family and family.isdigit() else None,
        "modelid": int(model) if model and model.isdigit() else None,
    }


def nccl_arch(machine):
    """uname -m -> the arch NCCL writes (x86_64, arm64, ppc64)."""
    if machine in ("aarch64", "arm64"):
        return "arm64"
    if machine.startswith("ppc64"):
        return "ppc64"
    return machine


def net_guid(node_guid):
    """sysfs node_guid 'b83f:d2ff:fe01:0203' -> NCCL's guid attribute.

    NCCL prints the verbs node_guid, which is big-endian, as a host (little-endian) integer
    with %lx: the bytes come out reversed and leading zeros go (the IBM dump's
    0x34f4e30003e1a258 is node GUID 58a2:e103:00e3:f434).
    """
    digits = str(node_guid).replace(":", "").strip()
    if not re.match(r"^[0-9a-fA-F]{16}$", digits):
        return None
    return "0x%x" % int.from_bytes(bytes.fromhex(digits), "little")


def rate_mbps(rate):
    """'400 Gb/sec (4X NDR)' -> 400000 (the Mb/s NCCL writes as net speed); None if unreadable."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec", rate or "")
    return round(float(match.group(1)) * 1000) if match else None


def sm_from_compute_cap(value):
    """'10.3' -> 103, as NCCL's sm attribute (major * 10 + minor)."""
    major, _dot, minor = str(value).strip().partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise TopologyError("compute capability %r is not 'major.minor'" % value)
    return int(major) * 10 + int(minor)


def max_nvlinks(sm):
    """NVLinks per GPU NCCL probes for this SM version (xml.cc)."""
    if sm < 60:
        return 0
    if sm < 70:
        return 4
    if sm < 80:
        return 6
    if sm < 90:
        return 12
    return 18


def digest(text):
    """How a file's content is named in a change (boot_files.digest: 'sha256:' and 16 hex digits)."""
    return boot_files.digest(boot_files.sha256_hex(text.encode("utf-8")))


def file_change(current, text):
    """The report's change for the topology file (None when it already holds ``text``).

    ``current`` is the file's content (None: no file); from and to are content digests.
    """
    if current == text:
        return None
    return results.change("nccl_topology.file", None if current is None else digest(current), digest(text))


def nvlinks_from_matrix(matrix, gpus):
    """NVLink edges per GPU bus ID from `nvidia-smi topo -m`'s NV# cells.

    gpus maps topo names ('GPU0') to ``{busid, sm, class}``. When a GPU's NV# counts add up
    to more links than the GPU has (every pair shows NV18 on an HGX board), its links go to
    NVSwitches: one edge to NVSWITCH_TARGET with the full count, as NCCL writes it for
    switches it cannot see. Otherwise each peer gets a direct edge with the peer's class.
    """
    edges = {}
    for name, gpu in gpus.items():
        peers = []
        for other, link in sorted((matrix.get(name) or {}).items()):
            if other != name and other in gpus and re.match(r"^NV\d+$", link or ""):
                peers.append((gpus[other]["busid"], int(link[2:]), gpus[other]["class"]))
        if not peers:
            edges[gpu["busid"]] = []
        elif sum(count for _busid, count, _tclass in peers) > max_nvlinks(gpu["sm"]):
            edges[gpu["busid"]] = [
                {
                    "target": NVSWITCH_TARGET,
                    "count": max(count for _busid, count, _tclass in peers),
                    "tclass": CLASS_NVSWITCH,
                }
            ]
        else:
            edges[gpu["busid"]] = [
                {"target": busid, "count": count, "tclass": tclass} for busid, count, tclass in sorted(peers)
            ]
    return edges


# ---------------------------------------------------------------- render


def _attrs(node, names):
    parts = []
    for name in names:
        value = node.get(name)
        if value is not None:
            parts.append("%s=%s" % (name, quoteattr(str(value))))
    return " ".join(parts)


def _render_pci(pci, depth, lines):
    pad = "  " * depth
    inner = []
    if pci.get("gpu") is not None:
        gpu = pci["gpu"]
        links = gpu.get("nvlinks") or []
        if links:
            inner.append("%s  <gpu %s>" % (pad, _attrs(gpu, _GPU_ATTRS)))
            inner.extend("%s    <nvlink %s/>" % (pad, _attrs(link, _NVLINK_ATTRS)) for link in links)
            inner.append("%s  </gpu>" % pad)
        else:
            inner.append("%s  <gpu %s/>" % (pad, _attrs(gpu, _GPU_ATTRS)))
    if pci.get("nets"):
        inner.append("%s  <nic>" % pad)
        inner.extend("%s    <net %s/>" % (pad, _attrs(net, _NET_ATTRS)) for net in pci["nets"])
        inner.append("%s  </nic>" % pad)
    children = []
    for child in sorted(pci.get("children") or [], key=lambda c: c["busid"]):
        _render_pci(child, depth + 1, children)
    if not inner and not children:
        lines.append("%s<pci %s/>" % (pad, _attrs(pci, _PCI_ATTRS)))
        return
    lines.append("%s<pci %s>" % (pad, _attrs(pci, _PCI_ATTRS)))
    lines.extend(inner)
    lines.extend(children)
    lines.append("%s</pci>" % pad)


def render(system):
    """The topology file for ``{cpus: [{numaid, affinity, arch, vendor, familyid, modelid,
    children: [pci]}]}``, pci ``{busid, class, vendor, device, subsystem_vendor,
    subsystem_device, link_speed, link_width, children, gpu, nets}``. Deterministic: no
    timestamps and no host_hash (NCCL derives it from the hostname and boot ID at run time)."""
    lines = [HEADER, '<system version="%s">' % TOPO_VERSION]
    for cpu in sorted(system["cpus"], key=lambda c: int(c["numaid"])):
        lines.append("  <cpu %s>" % _attrs(cpu, _CPU_ATTRS))
        for pci in sorted(cpu.get("children") or [], key=lambda c: c["busid"]):
            _render_pci(pci, 2, lines)
        lines.append("  </cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- parse


def _root(text):
    if not isinstance(text, str) or not text.strip():
        raise TopologyError("the file is empty")
    if re.search(r"<!(ENTITY|DOCTYPE)", text, re.IGNORECASE):
        raise TopologyError("refusing XML with a DOCTYPE or entity declarations")
    if parsing.has_surrogates(text):
        raise TopologyError("the file is not UTF-8 (a byte NCCL does not write)")
    try:
        root = ET.fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1))
    except ET.ParseError as exc:
        raise TopologyError("not well-formed XML (%s)" % exc) from exc
    if root.tag == "graphs":
        raise TopologyError(
            "this is an NCCL graph file (<graphs>, the NCCL_GRAPH_FILE format), not a topology "
            "(<system>); NCCL_TOPO_FILE must point at a topology dump such as NCCL_TOPO_DUMP_FILE writes"
        )
    if root.tag != "system":
        raise TopologyError("the root element is <%s>, not NCCL's <system>" % root.tag)
    version = root.get("version")
    if version != TOPO_VERSION:
        raise TopologyError('<system version="%s">: NCCL reads version %s' % (version, TOPO_VERSION))
    return root


def _kind(elem):
    pci_class = (elem.get("class") or "").lower()
    if elem.find("gpu") is not None or pci_class.startswith("0x03"):
        return "gpu"
    if elem.find("nic") is not None or pci_class.startswith("0x02"):
        return "nic"
    if pci_class.startswith("0x0604"):
        return "bridge"
    return "other"


# An integer attribute or sysfs value: decimal digits, or 0x and hex digits.
_INTEGER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]+")


def _int(value, what="attribute"):
    """An integer attribute (decimal or 0x hex); None when absent. A value that is not a
    non-negative integer within 64 bits raises: a reading that does not parse fails closed."""
    if value is None:
        return None
    # int() takes Arabic-Indic and full-width digits too, and '3_0' as 30
    if not (isinstance(value, str) and _INTEGER.fullmatch(value)):
        raise TopologyError("%s=%r is not an integer" % (what, value))
    number = int(value, 16) if value[:2].lower() == "0x" else int(value)
    if not 0 <= number < parsing.READING_LIMIT:
        raise TopologyError("%s=%r is out of range" % (what, value))
    return number


def _walk_pci(top, numaid, summary):
    """Every <pci> under a <cpu>, top down, with an explicit stack (no recursion to exhaust)."""
    stack = [(top, None, 1)]
    while stack:
        elem, parent, depth = stack.pop()
        if depth > MAX_PCI_DEPTH:
            raise TopologyError("<pci> elements nested more than %d deep" % MAX_PCI_DEPTH)
        busid = _pci_device(elem, numaid, parent, summary)
        stack.extend((child, busid, depth + 1) for child in reversed(elem.findall("pci")))


def _pci_device(elem, numaid, parent, summary):
    busid = normalize_bus_id(elem.get("busid") or "")
    if not busid:
        raise TopologyError("a <pci> element has no busid")
    if busid in summary["devices"]:
        raise TopologyError("bus ID %s appears twice" % busid)
    gpu = elem.find("gpu")
    device = {
        "kind": _kind(elem),
        "class": elem.get("class"),
        "numaid": numaid,
        "parent": parent,
        "gpu": None,
        "nets": [],
    }
    if gpu is not None:
        device["gpu"] = {
            "dev": _int(gpu.get("dev"), "gpu dev"),
            "sm": _int(gpu.get("sm"), "gpu sm"),
            "nvlinks": [
                {
                    "target": link.get("target"),
                    "count": _int(link.get("count"), "nvlink count"),
                    "tclass": link.get("tclass"),
                }
                for link in gpu.findall("nvlink")
            ],
        }
    for nic in elem.findall("nic"):
        device["nets"].extend(_net(net, busid, summary) for net in nic.findall("net"))
    summary["devices"][busid] = device
    return busid


def _net(elem, busid, summary):
    name = elem.get("name")
    if not name:
        raise TopologyError("a <net> element has no name")
    summary["nets"][name] = {
        "busid": busid,
        "speed": _int(elem.get("speed"), "net speed"),
        "port": _int(elem.get("port"), "net port"),
    }
    return name


def parse(text):
    """Read any NCCL topology file (dumps, hand-written static files with comments, PCI-only ones).

    Returns ``{cpus: {numaid: {affinity, arch, vendor, familyid, modelid}}, devices: {busid:
    {kind (gpu|nic|bridge|other), class, numaid, parent, gpu: {dev, sm, nvlinks} | None,
    nets: [names]}}, nets: {name: {busid, speed, port}}}``. A GPU is a <pci> with a <gpu>
    child or a display class (0x03...), a NIC one with <nic> or a network class (0x02...).
    Raises TopologyError for anything else, an NCCL graph file included, with a message that
    starts with TOOL; never another exception (deep nesting, non-UTF-8 bytes, a number attribute
    that is not one included).
    """
    try:
        return _parse(text)
    except TopologyError as exc:
        raise TopologyError("%s: %s" % (TOOL, exc)) from None
    except (ValueError, LookupError, TypeError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise TopologyError("%s: unreadable file (%s)" % (TOOL, exc)) from None


def _parse(text):
    root = _root(text)
    summary = {"cpus": {}, "devices": {}, "nets": {}}
    for cpu in root.findall("cpu"):
        numaid = cpu.get("numaid")
        if numaid is None:
            raise TopologyError("a <cpu> element has no numaid")
        summary["cpus"][numaid] = {
            "affinity": cpu.get("affinity"),
            "arch": cpu.get("arch"),
            "vendor": cpu.get("vendor"),
            "familyid": _int(cpu.get("familyid"), "cpu familyid"),
            "modelid": _int(cpu.get("modelid"), "cpu modelid"),
        }
        for pci in cpu.findall("pci"):
            _walk_pci(pci, numaid, summary)
        for nic in cpu.findall("nic"):
            for net in nic.findall("net"):
                _net(net, None, summary)
    if not summary["cpus"]:
        raise TopologyError("<system> has no <cpu> element")
    return summary


# ---------------------------------------------------------------- compare

_LABEL = {"gpu": "GPU", "nic": "NIC", "bridge": "PCI bridge", "other": "PCI device"}


def compare(found, node, node_bus_ids):
    """What differs between a parsed file (found) and the node (node, parsed the same way).

    node_bus_ids is every PCI bus ID the node has (/sys/bus/pci/devices). Each difference is
    ``{kind: missing|numa|extra|net, busid, message}``: a GPU or NIC of the node missing from
    the file, one on another NUMA node than the file says, a device in the file the node does
    not have, or a NIC whose RDMA device names differ. Sorted by bus ID, so stable.
    """
    differences = []
    present = set(normalize_bus_id(b) for b in node_bus_ids)
    for busid, device in sorted(node["devices"].items()):
        if device["kind"] not in ("gpu", "nic"):
            continue
        label = _LABEL[device["kind"]]
        listed = found["devices"].get(busid)
        if listed is None or listed["kind"] != device["kind"]:
            differences.append(
                {
                    "kind": "missing",
                    "busid": busid,
                    "message": "%s %s (NUMA %s) is on the node but not in the file"
                    % (label, busid, device["numaid"]),
                }
            )
            continue
        if listed["numaid"] != device["numaid"]:
            differences.append(
                {
                    "kind": "numa",
                    "busid": busid,
                    "message": "%s %s is on NUMA node %s; the file puts it on %s"
                    % (label, busid, device["numaid"], listed["numaid"]),
                }
            )
        if device["kind"] == "nic" and listed["nets"] and sorted(listed["nets"]) != sorted(device["nets"]):
            differences.append(
                {
                    "kind": "net",
                    "busid": busid,
                    "message": "NIC %s is %s on the node; the file names it %s"
                    % (busid, ", ".join(sorted(device["nets"])), ", ".join(sorted(listed["nets"]))),
                }
            )
    for busid, device in sorted(found["devices"].items()):
        if busid not in present:
            differences.append(
                {
                    "kind": "extra",
                    "busid": busid,
                    "message": "%s %s in the file is not on this node" % (_LABEL[device["kind"]], busid),
                }
            )
    return differences


# ---------------------------------------------------------------- the node (reads /sys)


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _speed(text):
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(match.group(1)) if match else float("inf")


def _width(text):
    if not (isinstance(text, str) and _INTEGER.fullmatch(text)):
        return 0
    return int(text, 16) if text[:2].lower() == "0x" else int(text)


def _pci_attrs(path, busid):
    """A <pci> element's attributes as NCCL reads them: link speed and width are the lower of
    the device's and the port above it (max_link_*, then ../max_link_*)."""
    node = {"busid": busid}
    for name in ("class", "vendor", "device", "subsystem_vendor", "subsystem_device"):
        value = _read(os.path.join(path, name))
        if value:
            node[name] = value
    device_speed = _read(os.path.join(path, "max_link_speed"))
    port_speed = _read(os.path.join(path, "..", "max_link_speed"))
    node["link_speed"] = port_speed if _speed(port_speed) < _speed(device_speed) else (device_speed or "")
    node["link_width"] = min(
        _width(_read(os.path.join(path, "max_link_width"))),
        _width(_read(os.path.join(path, "..", "max_link_width"))),
    )
    node["children"] = []
    node["gpu"] = None
    node["nets"] = []
    return node


def _chain(sys_root, busid):
    """(NCCL's PCI nodes from the top down to the device, their sysfs paths, the numa_node of the
    top one). NCCL climbs two path components at a time (skipping a switch's downstream port)
    and stops at the first one that is not a bus ID (the root complex, pciDDDD:BB)."""
    link = os.path.join(sys_root, "bus", "pci", "devices", busid)
    if not os.path.exists(link):
        raise TopologyError("%s is not in %s/bus/pci/devices" % (busid, sys_root))
    real = os.path.realpath(link)
    parts = real.split(os.sep)
    index = len(parts) - 1
    chain = [(parts[index], real)]
    while index >= 2 and is_bdf(parts[index - 1]) and is_bdf(parts[index - 2]):
        index -= 2
        chain.insert(0, (parts[index], os.sep.join(parts[: index + 1])))
    numa = _read(os.path.join(chain[0][1], "numa_node"))
    return chain, numa if numa is not None else "-1"


def _rdma_devices(sys_root):
    """Every RDMA device in /sys/class/infiniband: name, PCI bus ID, first port, speed, GUID."""
    base = os.path.join(sys_root, "class", "infiniband")
    try:
        names = sorted(
            os.listdir(base), key=lambda n: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", n)]
        )
    except OSError:
        return []
    devices = []
    for dev, name in enumerate(names):
        device_link = os.path.join(base, name, "device")
        if not os.path.exists(device_link):
            continue
        busid = os.path.basename(os.path.realpath(device_link))
        ports = sorted(
            int(p)
            for p in (
                os.listdir(os.path.join(base, name, "ports"))
                if os.path.isdir(os.path.join(base, name, "ports"))
                else []
            )
            if p.isdigit()
        )
        port = ports[0] if ports else 1
        port_dir = os.path.join(base, name, "ports", str(port))
        active = (_read(os.path.join(port_dir, "state")) or "").endswith("ACTIVE")
        devices.append(
            {
                "name": name,
                "dev": dev,
                "busid": normalize_bus_id(busid),
                "port": port,
                # a port that is not up reports a placeholder rate: leave speed to NCCL's own probe
                "speed": rate_mbps(_read(os.path.join(port_dir, "rate"))) if active else None,
                "active": active,
                "guid": net_guid(_read(os.path.join(base, name, "node_guid")) or ""),
            }
        )
    return devices


def _cpu_node(sys_root, numaid, cpuinfo, machine, width):
    node_dir = os.path.join(sys_root, "devices", "system", "node", "node%s" % numaid)
    affinity = _read(os.path.join(node_dir, "cpumap"))
    if affinity is None:
        cpulist = _read(os.path.join(node_dir, "cpulist"))
        affinity = cpumask(parse_cpulist(cpulist), width) if cpulist is not None else None
    cpu = {"numaid": numaid, "affinity": affinity, "arch": nccl_arch(machine), "children": []}
    if cpu["arch"] == "x86_64":
        cpu.update(parse_cpuinfo(cpuinfo))
    return cpu


def _cpu_width(sys_root):
    """nr_cpu_ids as the node's NUMA cpulists imply it (the width of every cpumap)."""
    base = os.path.join(sys_root, "devices", "system", "node")
    top = 0
    for entry in os.listdir(base) if os.path.isdir(base) else []:
        if re.match(r"^node\d+$", entry):
            cpus = parse_cpulist(_read(os.path.join(base, entry, "cpulist")) or "")
            top = max([top, *[c + 1 for c in cpus]])
    return top


def read_node(sys_root, cpuinfo, machine, gpus, matrix, gdr=True):
    """The node's topology model for render(), and every PCI bus ID it has.

    gpus: ``[{index, pci_bus_id, compute_cap}]`` from nvidia-smi; matrix: the ``matrix`` of
    parse_topo_matrix (or None: no NVLink edges). Returns ``(system, bus_ids, warnings)``.
    """
    gdr_flag = 1 if gdr else 0
    warnings = []
    nodes = {}
    cpus = {}
    width = _cpu_width(sys_root)

    def place(busid):
        chain, numa = _chain(sys_root, busid)
        if numa not in cpus:
            cpus[numa] = _cpu_node(sys_root, numa, cpuinfo, machine, width)
        parent = None
        for bdf, path in chain:
            bdf = normalize_bus_id(bdf)
            if bdf not in nodes:
                nodes[bdf] = _pci_attrs(path, bdf)
                (parent["children"] if parent else cpus[numa]["children"]).append(nodes[bdf])
            parent = nodes[bdf]
        return parent

    smi = {}
    for gpu in gpus:
        busid = normalize_bus_id(gpu["pci_bus_id"])
        node = place(busid)
        sm = sm_from_compute_cap(gpu["compute_cap"])
        node["gpu"] = {"dev": gpu["index"], "sm": sm, "rank": gpu["index"], "gdr": gdr_flag, "nvlinks": []}
        smi["GPU%d" % gpu["index"]] = {"busid": busid, "sm": sm, "class": node.get("class", "0x030200")}
    for busid, links in nvlinks_from_matrix(matrix or {}, smi).items():
        nodes[busid]["gpu"]["nvlinks"] = links
    for nic in _rdma_devices(sys_root):
        node = place(nic["busid"])
        if not nic["active"]:
            warnings.append(
                "RDMA device %s port %d is not ACTIVE; its speed is left out of the topology so NCCL "
                "probes it" % (nic["name"], nic["port"])
            )
        node["nets"].append(
            {
                "name": nic["name"],
                "dev": nic["dev"],
                "speed": nic["speed"],
                "port": nic["port"],
                "latency": NET_LATENCY,
                "guid": nic["guid"],
                "maxconn": NET_MAXCONN,
                "gdr": gdr_flag,
            }
        )
    try:
        bus_ids = sorted(os.listdir(os.path.join(sys_root, "bus", "pci", "devices")))
    except OSError:
        bus_ids = sorted(nodes)
    return {"cpus": list(cpus.values())}, bus_ids, warnings


# ---------------------------------------------------------------- module glue

SYS_ROOT = "/sys"
CPUINFO = "/proc/cpuinfo"


def node_topology(module, smi, gdr=True):
    """What both modules need from the node: ``(system, rendered_text, parsed, bus_ids, warnings)``.

    Runs ``nvidia-smi --query-gpu=index,uuid,pci.bus_id,compute_cap --format=csv,noheader`` and
    ``nvidia-smi topo -m`` (LC_ALL=C), reads SYS_ROOT and CPUINFO. Fails the module on a
    tool error; a topo -m it cannot read only costs the NVLink edges (with a warning).
    """
    from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
    from ansible_collections.gpufleet.node.plugins.module_utils.gpu.nvidia_smi import (
        GPU_LIST_FIELDS,
        ParseError,
        gpu_list_query,
        parse_query_csv,
        parse_topo_matrix,
    )

    gpus = tool_runner.run_parsed(
        module,
        gpu_list_query(smi),
        lambda out: parse_query_csv(out, fields=GPU_LIST_FIELDS),
        "Check that the NVIDIA driver is loaded and that nvidia-smi works on this node.",
    )
    gpus = [
        {"index": g["index"], "pci_bus_id": g["pci.bus_id"], "compute_cap": g["compute_cap"]} for g in gpus
    ]
    warnings = []
    matrix = None
    topo_cmd = [smi, "topo", "-m"]
    rc, out, err = tool_runner.run(module, topo_cmd, check=False)
    try:
        if rc != 0:
            raise ParseError("rc=%d: %s" % (rc, tool_runner.first_line(out, err)))
        matrix = parse_topo_matrix(out, gpu_count=len(gpus))["matrix"]
    except ParseError as exc:
        warnings.append("nvidia-smi topo -m: %s; the topology has no NVLink edges" % exc)
    try:
        with open(CPUINFO, encoding="utf-8") as handle:
            cpuinfo = handle.read()
    except OSError:
        cpuinfo = ""
    try:
        system, bus_ids, more = read_node(SYS_ROOT, cpuinfo, os.uname().machine, gpus, matrix, gdr)
    except TopologyError as exc:
        module.fail_json(msg="Cannot describe this node's topology: %s" % exc)
    text = render(system)
    return system, text, parse(text), bus_ids, warnings + more
