# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for nvidia-smi output: text in, plain data out.

Every public function takes the text a command printed and returns dicts and
lists of str/int/float/bool/None. A reading nvidia-smi does not have (``N/A``,
``[Not Supported]``, deprecated fields) is None, never 0 or a marker string, so
a gate can tell "unknown" from "zero". Input that is not what the tool prints
raises ParseError, whose message names the command and what was missing.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import (
    guard,
    has_surrogates,
    hexadecimal,
    quote,
    whole,
)
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import CLOCK_EVENT_REASONS


class ParseError(ValueError):
    """Raised when tool output is empty, truncated or not in the expected format."""


# The one reading nvidia-smi prints below zero: T.Limit, the margin to the slowdown temperature.
_SIGNED = frozenset(("tlimit_c", "temperature.gpu.tlimit"))


def _guard(tool, complete=False):
    """parsing.guard with this module's ParseError; nvidia-smi prints no negative reading but T.Limit.

    ``complete``: the output must end with a newline, as nvidia-smi's always does, so a cut inside
    the last value ('835' read as '8') is refused rather than read."""
    return guard(ParseError, tool, complete=complete, signed=_SIGNED)


# ---------------------------------------------------------------- values

# Canonical clock event ("throttle") reason names, in nvidia-smi's order (results owns the list).
THROTTLE_REASONS = CLOCK_EVENT_REASONS

# `nvidia-smi -q` labels for the reasons; the same in the old "Clocks Throttle
# Reasons" and the new "Clocks Event Reasons" sections.
_TEXT_REASONS = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clocks_setting",
    "display clocks setting": "display_clocks_setting",
}

# Words nvidia-smi prints instead of a value.
_NO_VALUE = frozenset(
    (
        "",
        "n/a",
        "not supported",
        "requested functionality has been deprecated",
        "unknown error",
        "insufficient permissions",
        "not available",
    )
)

# A number and an optional unit: '700.00 W', '81559 MiB', '100.00%', '16x'. The unit needs a
# space before it so hex ('0x1900') is not read as 0.
# [0-9], not \d: \d takes every Unicode digit (an XML character reference decodes to one)
_NUMBER = re.compile(r"^([-+]?[0-9]+(?:\.[0-9]+)?)(?:\s*%|x|\s+[A-Za-z][A-Za-z/()]*)?$")
_TRUE = frozenset(("yes", "enabled", "active", "true", "on"))
_FALSE = frozenset(("no", "disabled", "not active", "false", "off"))


def _clean(value):
    """Strip a raw value; None when nvidia-smi printed a no-value marker."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        # CSV wraps every marker in brackets: [N/A], [Not Supported], [GPU is lost].
        return None
    if value.lower() in _NO_VALUE:
        return None
    return value


def _number(value):
    """'700.00 W' -> 700.0, '29 C' -> 29, 'N/A' -> None. Unit suffixes are dropped."""
    value = _clean(value)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    digits = match.group(1)
    return float(digits) if "." in digits else int(digits)


def _reading(value):
    """A reading the report prints: a number, or None for a no-value marker. Anything else (NaN,
    Inf, '1e999', a cut or garbled value) raises ValueError, which the guard turns into ParseError:
    a reading that does not parse fails closed instead of reading as 'unknown'."""
    number = _number(value)
    if number is None and _clean(value) is not None:
        raise ValueError("reading %r is not a number" % _clean(value))
    return number


def _flag(value):
    """'Yes'/'Enabled'/'Active' -> True, 'No'/'Disabled'/'Not Active' -> False, else None."""
    value = _clean(value)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


def _first(*values):
    """The first value that is not None (readings moved between schema versions)."""
    for value in values:
        if value is not None:
            return value
    return None


def _sum_known(values):
    """Sum of the readings that exist; None when none of them does."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _any_true(*values):
    """True if any is True, False if all known ones are False, None if none is known."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return any(known)


def _gpu_record(index, uuid, pci_bus_id, name, serial, persistence_mode, mig_mode):
    """The per-GPU dict both -q parsers return, readings filled in by the caller."""
    return {
        "index": index,
        "uuid": uuid,
        "pci_bus_id": pci_bus_id,
        "name": name,
        "serial": serial,
        "persistence_mode": persistence_mode,
        "mig_mode": mig_mode,
        "power": None,
        "module_power": None,
        "temperature": None,
        "clocks_event_reasons": [],
        "ecc": None,
        "remapped_rows": None,
        "retired_pages": None,
    }


def _power(draw, requested, enforced, default, minimum, maximum):
    return {
        "draw_w": draw,
        "requested_limit_w": requested,
        "enforced_limit_w": enforced,
        "default_limit_w": default,
        "min_limit_w": minimum,
        "max_limit_w": maximum,
    }


def _order_reasons(names):
    """Canonical reasons first in nvidia-smi order, then any newer ones as found."""
    known = [r for r in THROTTLE_REASONS if r in names]
    return known + [n for n in names if n not in THROTTLE_REASONS]


def _active_reasons(flags):
    """Either reader's (reason name, raw flag) pairs -> the names whose flag reads active, ordered."""
    return _order_reasons([name for name, raw in flags if _flag(raw) is True])


def _add_power(record, find, read, names):
    """The record's power and module_power, for either reader: ``names`` are the v11 schema's power
    section, the later schemas' GPU power section and the module power section, ``find(name)`` gives
    one (None where the GPU has none), ``read(section, v11)`` reads it. The v11 section wins where
    the GPU has it."""
    v11, gpu, module = names
    legacy = find(v11)
    record["power"] = read(legacy, v11=True) if legacy is not None else read(find(gpu), v11=False)
    record["module_power"] = read(find(module), v11=False)


def _uncorrected(block, double_bit, total, counters):
    """Total uncorrected ECC errors in a volatile/aggregate block, across schemas, for either reader:
    ``double_bit(block)`` is the pre-Ampere section (None where the block has none), ``total`` reads
    its total, ``counters(block)`` gives the block's (lower-case name, raw reading) pairs."""
    if block is None:
        return None
    section = double_bit(block)
    if section is not None:
        return total(section)
    return _sum_known(_reading(raw) for name, raw in counters(block) if "uncorrectable" in name)


# ---------------------------------------------------------------- nvidia-smi -q -x

_XML_TOOL = "nvidia-smi -q -x"
# nvidia-smi's own doctype line names an external DTD that is never fetched.
_DOCTYPE = re.compile(r"<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+\"[^\"<>\[\]]*\"\s*>")

# No field nvidia-smi prints is longer than this (the longest of the real captures: a 55-character
# product name). A longer one is damaged or forged output, refused by name: carried into a module's
# result it would make that result too large for ansible-runner, which passes on an empty one instead
# (over 700000 characters), and the node would read as ok with nothing judged.
XML_FIELD_LIMIT = 1024


def _tag(elem):
    """``<tag>`` as a message names an element (a tag past the limit quoted, cut)."""
    return "<%s>" % elem.tag if len(elem.tag) <= XML_FIELD_LIMIT else quote(elem.tag, 40)


def _field_too_long(root):
    """Why a tag, text or attribute of the document is longer than XML_FIELD_LIMIT (naming it, and
    its GPU when it is in one), else None."""
    for section in [root, *root]:
        where = ""
        if section is not root and section.tag == "gpu":
            where = " of GPU %s" % quote(str(section.get("id")), 40)
        elements = [root] if section is root else section.iter()
        for elem in elements:
            tag = _tag(elem)
            fields = [("a tag", elem.tag), ("the text of %s" % tag, elem.text or "")]
            fields += [("the text after %s" % tag, elem.tail or "")]
            fields += [("attribute %s of %s" % (quote(k, 40), tag), v) for k, v in elem.attrib.items()]
            fields += [("an attribute name of %s" % tag, k) for k in elem.attrib]
            for what, value in fields:
                if len(value) > XML_FIELD_LIMIT:
                    return "%s: %s%s is %d characters long (nvidia-smi prints no field over %d): %s" % (
                        _XML_TOOL,
                        what,
                        where,
                        len(value),
                        XML_FIELD_LIMIT,
                        quote(value, 40),
                    )
    return None


def _safe_xml_root(text):
    """Parse without letting the document declare anything (no entity tricks), and refuse a field
    longer than nvidia-smi prints (XML_FIELD_LIMIT): every read of -q -x comes through here."""
    if re.search(r"<!ENTITY", text, re.IGNORECASE):
        raise ParseError("%s: refusing XML that declares entities (<!ENTITY)" % _XML_TOOL)
    text = _DOCTYPE.sub("", text, count=1)
    if re.search(r"<!DOCTYPE", text, re.IGNORECASE):
        raise ParseError("%s: refusing XML with a DOCTYPE other than nvidia_smi_log's" % _XML_TOOL)
    # ET wants str without an encoding declaration or bytes; the declaration is noise here.
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1)
    if has_surrogates(text):
        # Bytes that were not UTF-8 (decoded with surrogateescape) cannot reach expat as they are.
        raise ParseError("%s: output is not UTF-8 (a byte nvidia-smi does not print)" % _XML_TOOL)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError("%s: malformed or truncated XML (%s)" % (_XML_TOOL, exc)) from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError("%s: root element is %s, not <nvidia_smi_log>" % (_XML_TOOL, _tag(root)))
    too_long = _field_too_long(root)
    if too_long:
        raise ParseError(too_long)
    return root


def _xtext(elem, path):
    """Cleaned text of a sub-element; None when absent or a no-value marker."""
    if elem is None:
        return None
    found = elem.find(path)
    if found is None:
        return None
    return _clean(found.text)


def _xnum(elem, path):
    return _reading(_xtext(elem, path))


def _xml_power(section, v11):
    """One power-readings block; v11 names the requested limit power_limit."""
    if section is None:
        return None
    return _power(
        draw=_first(
            _xnum(section, "power_draw"),
            _xnum(section, "average_power_draw"),
            _xnum(section, "instant_power_draw"),
        ),
        requested=_xnum(section, "power_limit") if v11 else _xnum(section, "requested_power_limit"),
        enforced=_xnum(section, "enforced_power_limit") if v11 else _xnum(section, "current_power_limit"),
        default=_xnum(section, "default_power_limit"),
        minimum=_xnum(section, "min_power_limit"),
        maximum=_xnum(section, "max_power_limit"),
    )


def _xml_reasons(gpu):
    section = gpu.find("clocks_event_reasons")
    if section is None:
        section = gpu.find("clocks_throttle_reasons")
    if section is None:
        return []
    return _active_reasons(
        (re.sub(r"^clocks_(?:event|throttle)_reason_", "", c.tag), c.text) for c in section
    )


def _xml_uncorrected(block):
    """Pre-Ampere schema: <double_bit><device_memory/>...<total/></double_bit>; else
    dram_uncorrectable + sram_uncorrectable (v11/v12) or sram_uncorrectable_parity/_secded (v13)."""
    return _uncorrected(
        block,
        lambda b: b.find("double_bit"),
        lambda d: _xnum(d, "total"),
        lambda b: ((c.tag, c.text) for c in b),
    )


def _xml_ecc(gpu):
    errors = gpu.find("ecc_errors")
    return {
        "volatile_uncorrected": _xml_uncorrected(None if errors is None else errors.find("volatile")),
        "aggregate_uncorrected": _xml_uncorrected(None if errors is None else errors.find("aggregate")),
    }


def _xml_remapped(gpu):
    section = gpu.find("remapped_rows")
    return {
        "pending": _flag(_xtext(section, "remapped_row_pending")),
        "failure": _flag(_xtext(section, "remapped_row_failure")),
    }


def _xml_retired(gpu):
    section = gpu.find("retired_pages")
    return {
        "single_bit": _xnum(section, "multiple_single_bit_retirement/retired_count"),
        "double_bit": _xnum(section, "double_bit_retirement/retired_count"),
        "pending": _any_true(
            _flag(_xtext(section, "pending_blacklist")), _flag(_xtext(section, "pending_retirement"))
        ),
    }


def _xml_gpu(index, gpu):
    record = _gpu_record(
        index=index,
        uuid=_xtext(gpu, "uuid"),
        pci_bus_id=_first(_xtext(gpu, "pci/pci_bus_id"), _clean(gpu.get("id"))),
        name=_xtext(gpu, "product_name"),
        serial=_xtext(gpu, "serial"),
        persistence_mode=_flag(_xtext(gpu, "persistence_mode")),
        mig_mode=_flag(_xtext(gpu, "mig_mode/current_mig")),
    )
    _add_power(
        record, gpu.find, _xml_power, ("power_readings", "gpu_power_readings", "module_power_readings")
    )
    temperature = gpu.find("temperature")
    record["temperature"] = {
        "gpu_c": _xnum(temperature, "gpu_temp"),
        "memory_c": _xnum(temperature, "memory_temp"),
        "tlimit_c": _xnum(temperature, "gpu_temp_tlimit"),
    }
    record["clocks_event_reasons"] = _xml_reasons(gpu)
    record["ecc"] = _xml_ecc(gpu)
    record["remapped_rows"] = _xml_remapped(gpu)
    record["retired_pages"] = _xml_retired(gpu)
    return record


def _all_attached(tool, report, partial):
    """attached_gpus (what the report says the node has) must match the GPUs it describes, unless
    ``partial`` (``-i``, or a capture trimmed on purpose): fewer is a cut or lost report."""
    if not partial and report["attached_gpus"] is not None and report["attached_gpus"] != len(report["gpus"]):
        raise ParseError(
            "%s: the report says %d GPUs are attached but describes %d (truncated output?)"
            % (tool, report["attached_gpus"], len(report["gpus"]))
        )
    return report


@_guard(_XML_TOOL)
def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``{driver_version, cuda_version, attached_gpus, gpus: [...]}``, each GPU
    ``{index, uuid, pci_bus_id, name, serial, persistence_mode, mig_mode,
    power: {draw_w, requested_limit_w, enforced_limit_w, default_limit_w, min_limit_w,
    max_limit_w}, module_power: {same keys}, temperature: {gpu_c, memory_c, tlimit_c},
    clocks_event_reasons: [names from THROTTLE_REASONS], ecc: {volatile_uncorrected,
    aggregate_uncorrected}, remapped_rows: {pending, failure}, retired_pages:
    {single_bit, double_bit, pending}}``. index is the position in the output, which
    is nvidia-smi's index order. attached_gpus is what the report says is attached; it
    can exceed len(gpus) (``-i``, or a trimmed capture); a cut report is not well-formed XML
    and raises ParseError.
    """
    root = _safe_xml_root(text)
    gpus = root.findall("gpu")
    if not gpus:
        raise ParseError("%s: no <gpu> element in output" % _XML_TOOL)
    report = {
        "driver_version": _xtext(root, "driver_version"),
        "cuda_version": _xtext(root, "cuda_version"),
        "attached_gpus": _xnum(root, "attached_gpus"),
        "gpus": [_fill_missing(_xml_gpu(i, gpu)) for i, gpu in enumerate(gpus)],
    }
    return report


# ---------------------------------------------------------------- nvidia-smi -q (text)

_TEXT_TOOL = "nvidia-smi -q"
_KEY_VALUE = re.compile(r"^(\S.*?)\s+:(?:\s+(.*?))?\s*$")
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")


class _Node:
    """One `Key : Value` (or section) line of `nvidia-smi -q` and the lines indented under it."""

    __slots__ = ("children", "key", "value")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []

    def get(self, *names):
        """The first child whose key is any of names (case-insensitive), else None."""
        wanted = [n.lower() for n in names]
        for name in wanted:
            for child in self.children:
                if child.key.lower() == name:
                    return child
        return None

    def text(self, *path):
        """Cleaned value at a path of child keys; each step is a name or a tuple of alternatives."""
        node = self
        for step in path:
            node = node.get(*(step if isinstance(step, tuple) else (step,)))
            if node is None:
                return None
        return _clean(node.value)

    def num(self, *path):
        return _reading(self.text(*path))

    def walk(self):
        """Every node under this one, depth first; iterative, so no nesting can exhaust the stack."""
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def _text_tree(text):
    """Indentation tree of the -q report; a line may carry a value and children at once."""
    root = _Node("", None)
    stack = [(-1, root)]
    for raw in text.expandtabs(8).splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("==="):
            continue
        indent = len(line) - len(line.lstrip())
        match = _KEY_VALUE.match(line.strip())
        node = _Node(match.group(1), match.group(2) or "") if match else _Node(line.strip(), None)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _text_power(section, v11):
    if section is None:
        return None
    return _power(
        draw=_first(
            section.num("Power Draw"),
            section.num("Average Power Draw"),
            section.num("Instantaneous Power Draw"),
        ),
        requested=section.num("Power Limit") if v11 else section.num("Requested Power Limit"),
        enforced=section.num("Enforced Power Limit") if v11 else section.num("Current Power Limit"),
        default=section.num("Default Power Limit"),
        minimum=section.num("Min Power Limit"),
        maximum=section.num("Max Power Limit"),
    )


def _text_reasons(gpu):
    # "Clocks Event Reasons Counters" (microseconds spent) is a different section: not looked at.
    section = gpu.get("Clocks Event Reasons", "Clocks Throttle Reasons")
    if section is None:
        return []
    # HW Thermal/Power Brake Slowdown sit under HW Slowdown: walk() reaches them.
    return _active_reasons((_text_reason(node.key.lower()), node.value) for node in section.walk())


def _text_reason(label):
    return _TEXT_REASONS.get(label, re.sub(r"[^a-z0-9]+", "_", label).strip("_"))


def _text_uncorrected(block):
    return _uncorrected(
        block,
        lambda b: b.get("Double Bit"),
        lambda d: d.num("Total"),
        lambda b: ((c.key.lower(), c.value) for c in b.children),
    )


def _text_gpu(index, section):
    header = _GPU_HEADER.match(section.key)
    record = _gpu_record(
        index=index,
        uuid=section.text("GPU UUID"),
        pci_bus_id=_first(section.text("PCI", "Bus Id"), header.group(1) if header else None),
        name=section.text("Product Name"),
        serial=section.text("Serial Number"),
        persistence_mode=_flag(section.text("Persistence Mode")),
        mig_mode=_flag(section.text("MIG Mode", "Current")),
    )
    _add_power(
        record, section.get, _text_power, ("Power Readings", "GPU Power Readings", "Module Power Readings")
    )
    temperature = section.get("Temperature")
    if temperature is not None:
        record["temperature"] = {
            "gpu_c": temperature.num("GPU Current Temp"),
            "memory_c": temperature.num("Memory Current Temp"),
            "tlimit_c": temperature.num("GPU T.Limit Temp"),
        }
    record["clocks_event_reasons"] = _text_reasons(section)
    errors = section.get("ECC Errors")
    if errors is not None:
        record["ecc"] = {
            "volatile_uncorrected": _text_uncorrected(errors.get("Volatile")),
            "aggregate_uncorrected": _text_uncorrected(errors.get("Aggregate")),
        }
    remapped = section.get("Remapped Rows")
    if remapped is not None:
        record["remapped_rows"] = {
            "pending": _flag(remapped.text("Pending")),
            "failure": _flag(remapped.text("Remapping Failure Occurred")),
        }
    retired = section.get("Retired Pages")
    if retired is not None:
        record["retired_pages"] = {
            "single_bit": retired.num("Single Bit ECC"),
            "double_bit": retired.num("Double Bit ECC"),
            "pending": _any_true(
                _flag(retired.text("Pending Page Blacklist")), _flag(retired.text("Pending Page Retirement"))
            ),
        }
    return record


def _fill_missing(record):
    """Sections absent from a partial report (-d POWER, -d PAGE_RETIREMENT) read as all-None."""
    empty = {
        "power": _power(None, None, None, None, None, None),
        "module_power": _power(None, None, None, None, None, None),
        "temperature": {"gpu_c": None, "memory_c": None, "tlimit_c": None},
        "ecc": {"volatile_uncorrected": None, "aggregate_uncorrected": None},
        "remapped_rows": {"pending": None, "failure": None},
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
    }
    for key, value in empty.items():
        if record[key] is None:
            record[key] = value
    return record


@_guard(_TEXT_TOOL, complete=True)
def parse_query_text(text, partial=False):
    """Parse ``nvidia-smi -q`` (also ``-q -i N`` with ``partial``, and ``-q -d SECTION``); same
    shape as parse_query_xml. "Attached GPUs" must match the GPU sections unless ``partial``."""
    tree = _text_tree(text)
    sections = [n for n in tree.children if n.value is None and _GPU_HEADER.match(n.key)]
    if not sections:
        raise ParseError("%s: no 'GPU <pci bus id>' section in output" % _TEXT_TOOL)
    report = {
        "driver_version": tree.text("Driver Version"),
        "cuda_version": tree.text("CUDA Version"),
        "attached_gpus": tree.num("Attached GPUs"),
        "gpus": [_fill_missing(_text_gpu(i, s)) for i, s in enumerate(sections)],
    }
    return _all_attached(_TEXT_TOOL, report, partial)


# ---------------------------------------------------------------- --query-gpu --format=csv

_CSV_TOOL = "nvidia-smi --query-gpu --format=csv"
# Identifiers and versions that look like numbers but are not (serial 0000000000000, inforom 2.10).
_CSV_STRING_FIELDS = frozenset(
    ("serial", "uuid", "name", "driver_version", "vbios_version", "compute_cap", "gpu_serial", "gpu_uuid")
)
_CSV_STRING_PREFIXES = ("inforom.", "pci.", "platform.", "gpu_bus_id", "fabric.cluster")


def _csv_field_name(header):
    """'power.draw [W]' -> 'power.draw'."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header.strip())


def _csv_value(field, raw):
    value = _clean(raw)
    if value is None:
        return None
    if field in _CSV_STRING_FIELDS or field.startswith(_CSV_STRING_PREFIXES):
        return value
    number = _number(value)
    return value if number is None else number


# The GPU list gpu_pinning and nccl_topology both read: one query, so a module that compares both
# roles (node_facts) runs nvidia-smi once for it. compute_cap needs driver >= 510.
GPU_LIST_FIELDS = ["index", "uuid", "pci.bus_id", "compute_cap"]


def gpu_list_query(smi):
    """argv of the GPU list query (``--format=csv,noheader``; parse with fields=GPU_LIST_FIELDS)."""
    return [smi, "--query-gpu=" + ",".join(GPU_LIST_FIELDS), "--format=csv,noheader"]


@_guard(_CSV_TOOL, complete=True)
def parse_query_csv(text, fields=None):
    """Parse ``--query-gpu=... --format=csv[,noheader][,nounits]`` into one dict per GPU row.

    With ``noheader`` pass ``fields`` (the --query-gpu names in order). Numbers
    lose their units; bracketed markers such as ``[N/A]`` become None. Output with no GPU row,
    a row with the wrong number of values, or no newline after the last row (cut inside a value)
    raises ParseError.
    """
    try:
        rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    except csv.Error as exc:  # not a ValueError: a field over csv's 128 KiB limit
        raise ParseError("%s: not CSV (%s)" % (_CSV_TOOL, exc)) from None
    if rows and fields is None:
        fields = [_csv_field_name(h) for h in rows.pop(0)]
    elif rows and [_csv_field_name(h) for h in rows[0]] == list(fields):
        rows.pop(0)  # a header we were not told about
    if not fields:
        raise ParseError("%s: no header line and no field names given" % _CSV_TOOL)
    result = []
    for number, row in enumerate(rows, start=1):
        if len(row) != len(fields):
            raise ParseError(
                "%s: row %d has %d values for %d fields (truncated output?)"
                % (_CSV_TOOL, number, len(row), len(fields))
            )
        result.append({f: _csv_value(f, v) for f, v in zip(fields, row, strict=True)})
    if not result:
        raise ParseError("%s: no GPU row after the header (truncated output?)" % _CSV_TOOL)
    return result


# ---------------------------------------------------------------- thermal sample (one CSV query)

# What the thermal judge reads of every GPU, in one cheap query: the idle gate reads it once, the
# burn-in once a second. temperature.gpu.tlimit needs driver >= R525.
THERMAL_FIELDS = (
    "uuid",
    "index",
    "temperature.gpu",
    "temperature.memory",
    "temperature.gpu.tlimit",
    "clocks_event_reasons.active",
    "utilization.gpu",
    "power.draw",
    "clocks.sm",
)

# NVML's nvmlClocksEventReasons bits, as `clocks_event_reasons.active` prints them (0x...).
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


def thermal_query(smi):
    """argv of the thermal sample (``--format=csv,noheader,nounits``; parse with parse_thermal_sample)."""
    return [smi, "--query-gpu=" + ",".join(THERMAL_FIELDS), "--format=csv,noheader,nounits"]


def decode_reasons(mask):
    """'0x0000000000000041' -> ['gpu_idle', 'hw_thermal_slowdown'] (nvidia-smi order); None if unreadable."""
    if isinstance(mask, int) and not isinstance(mask, bool):
        value = mask
    elif isinstance(mask, str):
        # 0x and hex digits, or decimal digits: int() would also read '0x0_41' as 0x41
        try:
            text = mask.strip()
            value = hexadecimal(text, "mask") if text[:2].lower() == "0x" else whole(text, "mask")
        except ValueError:
            return None
    else:
        return None
    names = [name for name, bit in REASON_BITS.items() if value & bit]
    known = [r for r in THROTTLE_REASONS if r in names]
    return known + [n for n in names if n not in known]


def _reading_number(value):
    """A sample's reading: a number, or None for a marker ([N/A]); text where a number belongs
    (NaN, Inf, a garbled value) raises ValueError (ParseError through the guard)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("reading %r is not a number" % (value,))
    return value


def _percent(value):
    value = _reading_number(value)
    if value is not None and value > 100:
        raise ValueError("utilization %r%% is over 100%%" % (value,))
    return value


def _reasons(mask):
    """The active reasons of a sample; None when the GPU does not report them ([N/A]), and a
    ValueError when it printed a mask that is not one (a garbled mask must not read as 'none')."""
    if mask is None:
        return None
    reasons = decode_reasons(mask)
    if reasons is None:
        raise ValueError("clocks_event_reasons.active %r is not a bit mask" % (mask,))
    return reasons


@_guard(_CSV_TOOL)
def parse_thermal_sample(text):
    """One ``thermal_query`` output -> ``[{uuid, index, gpu_c, memory_c, tlimit_c, reasons,
    utilization_pct, power_w, sm_mhz}]`` (the thermal judge's readings); missing readings are None.
    Raises ParseError."""
    return [_thermal_record(row) for row in parse_query_csv(text, fields=list(THERMAL_FIELDS))]


def _thermal_record(row):
    """The thermal judge's reading of one parsed THERMAL_FIELDS row."""
    return {
        "uuid": row["uuid"],
        "index": _reading_number(row["index"]),
        "gpu_c": _reading_number(row["temperature.gpu"]),
        "memory_c": _reading_number(row["temperature.memory"]),
        "tlimit_c": _reading_number(row["temperature.gpu.tlimit"]),
        "reasons": _reasons(row["clocks_event_reasons.active"]),
        "utilization_pct": _percent(row["utilization.gpu"]),
        "power_w": _reading_number(row["power.draw"]),
        "sm_mhz": _reading_number(row["clocks.sm"]),
    }


# ---------------------------------------------------------------- power sample (one CSV query)

# What gpu_power reads of every GPU, before and after it sets limits: persistence and the power limits,
# in one CSV query (a fraction of -q -x's output and time). power.limit is the requested limit,
# enforced.power.limit what the GPU enforces (lower under a rack/PDU power brake).
POWER_FIELDS = (
    "uuid",
    "pci.bus_id",
    "persistence_mode",
    "power.limit",
    "enforced.power.limit",
    "power.default_limit",
    "power.min_limit",
    "power.max_limit",
)


def power_query(smi):
    """argv of the power sample (``--format=csv,noheader,nounits``; parse with parse_power_sample)."""
    return [smi, "--query-gpu=" + ",".join(POWER_FIELDS), "--format=csv,noheader,nounits"]


@_guard(_CSV_TOOL)
def parse_power_sample(text):
    """One ``power_query`` output -> ``[{uuid, pci_bus_id, persistence_mode, power: {requested_limit_w,
    enforced_limit_w, default_limit_w, min_limit_w, max_limit_w}}]``, the keys -q -x gives; a reading
    the GPU does not report is None. Raises ParseError (no GPU listed, or a row cut short)."""
    rows = parse_query_csv(text, fields=list(POWER_FIELDS))
    if not rows:
        raise ParseError("%s: no GPU in the power query's output" % _CSV_TOOL)
    return [
        {
            "uuid": row["uuid"],
            "pci_bus_id": row["pci.bus_id"],
            "persistence_mode": _flag(row["persistence_mode"]),
            "power": {
                "requested_limit_w": _reading_number(row["power.limit"]),
                "enforced_limit_w": _reading_number(row["enforced.power.limit"]),
                "default_limit_w": _reading_number(row["power.default_limit"]),
                "min_limit_w": _reading_number(row["power.min_limit"]),
                "max_limit_w": _reading_number(row["power.max_limit"]),
            },
        }
        for row in rows
    ]


# ---------------------------------------------------------------- watch sample (one CSV query)

# What `gpufleet watch` reads of every GPU in service, in one query: the thermal sample, both power
# limits (requested and enforced: a PDU protection lowers only the enforced one) and the clock event
# reason counters (microseconds each reason was active since the driver loaded; driver >= R535), so a
# cap that came and went between two samples still shows.
REASON_COUNTERS = (
    "sw_power_cap",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
REASON_COUNTER_FIELDS = tuple("clocks_event_reasons_counters.%s" % name for name in REASON_COUNTERS)
WATCH_FIELDS = (*THERMAL_FIELDS, "power.limit", "enforced.power.limit", *REASON_COUNTER_FIELDS)


def watch_query(smi):
    """argv of the watch sample (``--format=csv,noheader,nounits``; parse with parse_watch_sample)."""
    return [smi, "--query-gpu=" + ",".join(WATCH_FIELDS), "--format=csv,noheader,nounits"]


@_guard(_CSV_TOOL)
def parse_watch_sample(text):
    """One ``watch_query`` output -> parse_thermal_sample's records plus ``requested_limit_w``,
    ``enforced_limit_w`` and ``reason_us`` (``{reason: microseconds or None}``). Raises ParseError."""
    records = []
    for row in parse_query_csv(text, fields=list(WATCH_FIELDS)):
        record = _thermal_record(row)
        record["requested_limit_w"] = _reading_number(row["power.limit"])
        record["enforced_limit_w"] = _reading_number(row["enforced.power.limit"])
        record["reason_us"] = {
            name: _reading_number(row[field])
            for name, field in zip(REASON_COUNTERS, REASON_COUNTER_FIELDS, strict=True)
        }
        records.append(record)
    return records


# ---------------------------------------------------------------- compute processes (one CSV query)

# The processes with a compute context on a GPU, as a GPU reset must find none (nvidia-smi(1), -r: "There
# can't be any applications using these devices"). With its header: a node with no process prints the
# header alone (the 590-driver capture), so an empty output is a cut one, never "no process".
COMPUTE_APP_FIELDS = ("gpu_bus_id", "gpu_uuid", "pid", "process_name", "used_gpu_memory")
_APPS_TOOL = "nvidia-smi --query-compute-apps --format=csv"


def compute_apps_query(smi):
    """argv of the compute process list (``--format=csv``, with its header; parse_compute_apps)."""
    return [smi, "--query-compute-apps=" + ",".join(COMPUTE_APP_FIELDS), "--format=csv"]


@_guard(_APPS_TOOL)
def parse_compute_apps(text):
    """One ``compute_apps_query`` output -> ``[{pci_bus_id, uuid, pid, name, used_memory_mib}]``, one per
    process (none when the header stands alone); a pid or memory the driver does not give is None.
    Raises ParseError when the header is missing or a row is cut."""
    try:
        rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if r]
    except csv.Error as exc:
        raise ParseError("%s: not CSV (%s)" % (_APPS_TOOL, exc)) from None
    if not rows or [_csv_field_name(h) for h in rows[0]] != list(COMPUTE_APP_FIELDS):
        raise ParseError("%s: no header line naming %s" % (_APPS_TOOL, ", ".join(COMPUTE_APP_FIELDS)))
    apps = []
    for number, row in enumerate(rows[1:], start=1):
        if len(row) != len(COMPUTE_APP_FIELDS):
            raise ParseError(
                "%s: row %d has %d values for %d fields (truncated output?)"
                % (_APPS_TOOL, number, len(row), len(COMPUTE_APP_FIELDS))
            )
        bus, uuid, pid, name, memory = (v.strip() for v in row)
        apps.append(
            {
                "pci_bus_id": bus,
                "uuid": uuid,
                "pid": _reading(pid),
                "name": _clean(name),
                "used_memory_mib": _reading(memory),
            }
        )
    return apps


# ---------------------------------------------------------------- nvidia-smi -L

_LIST_TOOL = "nvidia-smi -L"
_LIST_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[^)\s]+)\)\s*$")
_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")


@_guard(_LIST_TOOL)
def parse_list(text):
    """Parse ``nvidia-smi -L`` into ``[{index, name, uuid, mig: [{index, profile, uuid}]}]``."""
    gpus = []
    for line in text.splitlines():
        gpu = _LIST_GPU.match(line)
        mig = _LIST_MIG.match(line)
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "name": gpu.group(2), "uuid": gpu.group(3), "mig": []})
        elif mig and gpus:
            gpus[-1]["mig"].append(
                {"index": int(mig.group(2)), "profile": mig.group(1), "uuid": mig.group(3)}
            )
        elif line.lstrip().startswith(("GPU ", "MIG ")):
            # Other lines (driver warnings) are not ours to judge; a cut device line is.
            raise ParseError("%s: incomplete device line %r" % (_LIST_TOOL, line.strip()))
    if not gpus:
        raise ParseError("%s: no 'GPU N: ... (UUID: ...)' line in output" % _LIST_TOOL)
    return gpus


# ---------------------------------------------------------------- nvidia-smi topo -m

_TOPO_TOOL = "nvidia-smi topo -m"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Header phrases that contain spaces, and the keys used for them.
_AFFINITY_COLUMNS = (
    ("CPU Affinity", "cpu_affinity"),
    ("NUMA Affinity", "numa_affinity"),
    ("GPU NUMA ID", "gpu_numa_id"),
)
_LINK = re.compile(r"NV\d+|SYS|NODE|PHB|PXB|PIX|PSB|SOC|X")
_GPU_NAME = re.compile(r"^GPU(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# Lower is closer. Only these count as "near" for NIC selection; SYS crosses sockets.
_NEAR_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3}


def _is_gpu(name):
    return _GPU_NAME.match(name) is not None


def _gpu_number(name):
    match = _GPU_NAME.match(name)
    return int(match.group(1)) if match else -1


def _topo_header(line):
    """Device names and affinity column keys from the header line."""
    for phrase, key in _AFFINITY_COLUMNS:
        line = line.replace(phrase, "\0" + key)
    tokens = line.split()
    devices = [t for t in tokens if not t.startswith("\0")]
    columns = [t[1:] for t in tokens if t.startswith("\0")]
    if tokens[: len(devices)] != devices:
        raise ParseError("%s: device names after the affinity columns in the header" % _TOPO_TOOL)
    if len(set(devices)) != len(devices):
        raise ParseError("%s: a device appears twice in the header" % _TOPO_TOOL)
    return devices, columns


def _split_links(tokens):
    """Split cells that ran together ('PIXNODE') when a value filled its column."""
    result = []
    for token in tokens:
        parts = _LINK.findall(token)
        result.extend(parts if parts and "".join(parts) == token else [token])
    return result


def _topo_cells(line, count, columns):
    """(name, link values, affinity cells by column) for one matrix row."""
    cells = line.split("\t")
    if len(cells) > count:
        links = [c.strip() for c in cells[1 : count + 1]]
        if all(_LINK.fullmatch(v) for v in links):
            rest = [c.strip() for c in cells[count + 1 :]]
            # Wide headers make nvidia-smi emit extra tabs ('0\t\tN/A'), so the last
            # column takes the first non-empty cell left over.
            affinity = {col: (rest[i] if i < len(rest) else "") for i, col in enumerate(columns[:-1])}
            if columns:
                tail = [c for c in rest[len(columns) - 1 :] if c]
                affinity[columns[-1]] = tail[0] if tail else ""
            return cells[0].strip(), links, affinity
    # Whitespace-aligned (copied from a terminal, tabs expanded).
    tokens = line.split()
    name, tokens = tokens[0], _split_links(tokens[1:])
    links, rest = tokens[:count], tokens[count:]
    if len(links) < count or not all(_LINK.fullmatch(v) for v in links):
        raise ParseError("%s: row %s has fewer than %d link values (truncated?)" % (_TOPO_TOOL, name, count))
    if len(rest) > len(columns):
        raise ParseError("%s: row %s has more cells than the header" % (_TOPO_TOOL, name))
    # Empty cells vanish in whitespace; the ones that can be empty (CPU Affinity) come first.
    rest = [""] * (len(columns) - len(rest)) + rest
    return name, links, dict(zip(columns, rest, strict=True))


def _int_or_none(value):
    number = _number(value)
    return number if isinstance(number, int) else None


@_guard(_TOPO_TOOL, complete=True)
def parse_topo_matrix(text, gpu_count=None):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{devices, matrix, cpu_affinity, numa_affinity, gpu_numa_id,
    nic_legend}``; matrix[row][col] is 'X', 'NV18', 'PIX', 'SYS', ...
    Affinity maps are keyed by GPU name ('GPU0'). With gpu_count, a matrix
    with a different number of GPUs raises ParseError.
    """
    lines = [_ANSI.sub("", line).rstrip("\r\n") for line in text.splitlines()]
    start = next((i for i, row in enumerate(lines) if row[:1].isspace() and "GPU0" in row.split()), None)
    if start is None:
        raise ParseError("%s: no header line with GPU0 found" % _TOPO_TOOL)
    devices, columns = _topo_header(lines[start])
    topo = {"devices": devices, "matrix": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    end = start + 1
    for end in range(start + 1, len(lines)):
        line = lines[end]
        if not line.strip() or line.startswith("Legend"):
            break
        name, links, affinity = _topo_cells(line, len(devices), columns)
        if name not in devices:
            raise ParseError("%s: row %s is not in the header" % (_TOPO_TOOL, name))
        if name in topo["matrix"]:
            raise ParseError("%s: row %s appears twice" % (_TOPO_TOOL, name))
        topo["matrix"][name] = dict(zip(devices, links, strict=True))
        if _is_gpu(name):
            topo["cpu_affinity"][name] = _clean(affinity.get("cpu_affinity"))
            topo["numa_affinity"][name] = _int_or_none(affinity.get("numa_affinity"))
            topo["gpu_numa_id"][name] = _int_or_none(affinity.get("gpu_numa_id"))
    missing = [d for d in devices if d not in topo["matrix"]]
    if missing:
        raise ParseError("%s: no row for %s (truncated output?)" % (_TOPO_TOOL, ", ".join(missing)))
    topo["nic_legend"] = dict(m.groups() for m in map(_NIC_LEGEND.match, lines[end:]) if m)
    found = sum(1 for d in devices if _is_gpu(d))
    if gpu_count is not None and found != gpu_count:
        raise ParseError("%s: matrix has %d GPUs, expected %d" % (_TOPO_TOOL, found, gpu_count))
    return topo


def _topo_gpus(topo):
    return sorted((d for d in topo["devices"] if _is_gpu(d)), key=_gpu_number)


def nvlink_domains(topo):
    """GPUs joined (directly or through others) by NV# links, e.g. [['GPU0', ..., 'GPU7']].

    A GPU without NVLink is a domain of its own. Domains and members are in GPU order.
    """
    gpus = _topo_gpus(topo)
    domain_of = {g: {g} for g in gpus}
    for a in gpus:
        for b in gpus:
            link = topo["matrix"][a].get(b, "")
            if a != b and link.startswith("NV") and domain_of[a] is not domain_of[b]:
                merged = domain_of[a] | domain_of[b]
                for member in merged:
                    domain_of[member] = merged
    domains = []
    for gpu in gpus:
        if domain_of[gpu] not in domains:
            domains.append(domain_of[gpu])
    return [sorted(d, key=_gpu_number) for d in domains]


def nearest_nics(topo, gpu):
    """NIC names (ibdev from the NIC Legend) at the GPU's closest PCIe distance.

    Only PIX < PXB < PHB < NODE count; a GPU whose NICs are all SYS has none near.
    """
    row = topo["matrix"].get(gpu, {})
    ranked = [(_NEAR_RANK[v], d) for d, v in row.items() if not _is_gpu(d) and v in _NEAR_RANK]
    if not ranked:
        return []
    best = min(rank for rank, _device in ranked)
    return [topo["nic_legend"].get(d, d) for rank, d in ranked if rank == best]


def _nic_numa(topo, nic, gpu_numa):
    """A NIC's NUMA node, when the GPUs sharing its PCIe tree (PIX/PXB/PHB) agree on one."""
    nodes = {
        gpu_numa[g]
        for g, link in topo["matrix"][nic].items()
        if g in gpu_numa and link in ("PIX", "PXB", "PHB") and gpu_numa[g] is not None
    }
    return nodes.pop() if len(nodes) == 1 else None


def build_topology(gpus, topo):
    """Combine ``parse_query_xml(...)['gpus']`` with ``parse_topo_matrix(...)``.

    Returns ``(topology, warnings)``. topology is None, with a warning saying
    why, when there is no matrix or its GPU count disagrees with the GPU list
    (GPUn in the matrix is nvidia-smi index n, so the two must line up).
    """
    if topo is None:
        return None, []
    names = _topo_gpus(topo)
    if names != ["GPU%d" % i for i in range(len(gpus))]:
        return None, [
            "nvidia-smi topo -m shows %d GPUs (%s) but nvidia-smi -q -x lists %d; GPU topology left unset"
            % (len(names), ", ".join(names) or "none", len(gpus))
        ]
    key_of = {n: (g["uuid"] or n) for n, g in zip(names, gpus, strict=True)}
    if len(set(key_of.values())) != len(key_of):
        # Masked captures (all-zero UUIDs) would silently merge GPUs in a map keyed by UUID.
        return None, ["GPU UUIDs from nvidia-smi -q -x are not unique; GPU topology left unset"]
    gpu_numa = {n: topo["numa_affinity"].get(n) for n in names}
    topology = {
        "matrix": topo["matrix"],
        "nvlink_domains": [[key_of[n] for n in domain] for domain in nvlink_domains(topo)],
        "gpus": {},
        "nics": {},
    }
    for name, gpu in zip(names, gpus, strict=True):
        topology["gpus"][key_of[name]] = {
            "index": gpu["index"],
            "topo_name": name,
            "pci_bus_id": gpu["pci_bus_id"],
            "numa_node": gpu_numa[name],
            "gpu_numa_id": topo["gpu_numa_id"].get(name),
            "cpu_affinity": topo["cpu_affinity"].get(name),
            "nearest_nics": nearest_nics(topo, name),
        }
    for nic in (d for d in topo["devices"] if not _is_gpu(d)):
        ibdev = topo["nic_legend"].get(nic, nic)
        topology["nics"][ibdev] = {
            "topo_name": nic,
            "numa_node": _nic_numa(topo, nic, gpu_numa),
            "nearest_gpus": [
                key_of[n] for n in names if ibdev in topology["gpus"][key_of[n]]["nearest_nics"]
            ],
        }
    return topology, []
