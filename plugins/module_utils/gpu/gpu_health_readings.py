# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware-health readings of ``nvidia-smi -q -x``: PCIe link, replay counter, row remapping,
ECC, retired pages, the GPU Recovery Action and the NVLink fabric's state, per GPU.

The same document the gate already reads for power and temperatures (nvidia_smi.parse_query_xml);
:func:`health_from_root` takes the root element nvidia_smi's safe XML parse gives, so a caller
that has it parses once, and :func:`parse_health_xml` takes the text. A field the XML version does
not have, or that reads N/A (not supported on this GPU), is None, never 0: "unknown" is not
"healthy". A field that is there but is not ASCII digits (or a Yes/No flag) raises nvidia_smi's
ParseError naming the command.

The recovery action (``<gpu_recovery_action>``, driver 570+; ``GPU Recovery Action`` in ``-q``) is
what the driver says the GPU needs after an uncorrectable fault: ``None``, ``GPU Reset``, ``Node
Reboot``, ``Drain P2P``, ``Drain and Reset`` (NVML's nvmlDeviceGpuRecoveryAction_t; newer drivers add
more). It is read as the driver prints it; an older driver without the element, or N/A, is None.
Unlike the kernel log's Xid lines it stays until the action is taken.

The fabric (``<fabric><state>`` and ``<status>``; ``Fabric`` in ``-q``, ``-q -d FABRIC``) is the GPU's
registration with the NVSwitch fabric that Fabric Manager sets up on an HGX baseboard: ``Not
Started``, ``In Progress`` or ``Completed`` (NVML's nvmlGpuFabricState_t), and the result, ``Success``
or the error NVML names. A GPU that is on no NVSwitch fabric (a PCIe card, a single GPU: every real
capture here, the H200 of driver 580, the Blackwell workstation card of 590 and the A100 of 535) reads
``N/A``; a driver older than the section (the A100 of 510) has none: both are None, not judged.

PCIe: a GPU lowers its link generation at idle to save power (an idle H100/H200 may show Gen1 of
Gen5), so the generation is only meaningful under load; the width should stay at its maximum.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard
from ansible_collections.gpufleet.node.plugins.module_utils.gpu import nvidia_smi

ParseError = nvidia_smi.ParseError
TOOL = "nvidia-smi -q -x"

# '16x' (width), '5' (generation), '0' (counters): ASCII digits only.
_COUNT = re.compile(r"^([0-9]{1,20})x?$")
# A recovery action as the driver names it: words of ASCII letters (NVML's names, and the ones a
# newer driver adds), nothing else.
_ACTION = re.compile(r"^[A-Za-z][A-Za-z0-9 /_-]{0,39}$")
# A fabric state or status as nvidia-smi words it: NVML's state names, "Success" or an NVML error
# string ("Unknown Error", "Insufficient Resources"), nothing else.
_FABRIC_WORDS = re.compile(r"^[A-Za-z][A-Za-z0-9 /_.,()'-]{0,59}$")


def _count(elem: ET.Element | None, path: str) -> int | None:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or len(found):  # absent, or a section where a value was expected
        return None
    value = nvidia_smi._clean(found.text)
    if value is None:
        return None
    match = _COUNT.match(value)
    if not match:
        raise ParseError("%s: <%s> %r is not a count" % (TOOL, path.rsplit("/", 1)[-1], value[:40]))
    return int(match.group(1))


def _flag(elem: ET.Element | None, path: str) -> bool | None:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None:
        return None
    value = nvidia_smi._clean(found.text)
    flag = nvidia_smi._flag(value)
    if value is not None and flag is None:
        raise ParseError("%s: <%s> %r is not Yes/No" % (TOOL, path.rsplit("/", 1)[-1], value[:40]))
    return flag


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _recovery_action(gpu: ET.Element) -> str | None:
    value = nvidia_smi._clean(gpu.findtext("gpu_recovery_action"))
    if value is None:
        return None
    if not _ACTION.match(value):
        raise ParseError("%s: <gpu_recovery_action> %r is not a recovery action" % (TOOL, value[:40]))
    return value


def _fabric(gpu: ET.Element) -> dict[str, str | None] | None:
    """``{state, status}`` of the GPU's NVSwitch fabric registration; None without a section or with
    state N/A (not on a fabric)."""
    section = gpu.find("fabric")
    if section is None:
        return None
    found: dict[str, str | None] = {}
    for tag in ("state", "status"):
        # as printed, but N/A or empty: a failed status may be "Unknown Error", which _clean drops
        text = (section.findtext(tag) or "").strip()
        if text in ("", "N/A"):
            found[tag] = None
            continue
        if not _FABRIC_WORDS.match(text):
            raise ParseError("%s: <fabric><%s> %r is not a fabric %s" % (TOOL, tag, text[:40], tag))
        found[tag] = text
    if found["state"] is None:
        return None
    return found


def _pcie(gpu: ET.Element) -> dict[str, int | None]:
    pci = gpu.find("pci")
    link = None if pci is None else pci.find("pci_gpu_link_info")
    return {
        "gen_current": _count(link, "pcie_gen/current_link_gen"),
        "gen_max": _count(link, "pcie_gen/max_link_gen"),
        "gen_device_max": _count(link, "pcie_gen/max_device_link_gen"),
        "gen_host_max": _count(link, "pcie_gen/max_host_link_gen"),
        "width_current": _count(link, "link_widths/current_link_width"),
        "width_max": _count(link, "link_widths/max_link_width"),
        "replay_counter": _count(pci, "replay_counter"),
        "replay_rollover_counter": _count(pci, "replay_rollover_counter"),
    }


def _ecc_block(block: ET.Element | None) -> dict[str, int | None]:
    """One volatile/aggregate block. Ampere+ (v11-v13): SRAM and DRAM, the SRAM uncorrectable split
    into parity and SEC-DED on v13; older: single_bit/double_bit totals (device memory and caches)."""
    if block is not None and block.find("double_bit") is not None:
        correctable, uncorrectable = _count(block, "single_bit/total"), _count(block, "double_bit/total")
        return {
            "correctable": correctable,
            "uncorrectable": uncorrectable,
            "sram_correctable": None,
            "sram_uncorrectable": None,
            "dram_correctable": None,
            "dram_uncorrectable": None,
        }
    sram_c = _count(block, "sram_correctable")
    sram_u = _sum(
        _count(block, "sram_uncorrectable"),
        _count(block, "sram_uncorrectable_parity"),
        _count(block, "sram_uncorrectable_secded"),
    )
    dram_c, dram_u = _count(block, "dram_correctable"), _count(block, "dram_uncorrectable")
    return {
        "correctable": _sum(sram_c, dram_c),
        "uncorrectable": _sum(sram_u, dram_u),
        "sram_correctable": sram_c,
        "sram_uncorrectable": sram_u,
        "dram_correctable": dram_c,
        "dram_uncorrectable": dram_u,
    }


def _ecc(gpu: ET.Element) -> dict[str, Any]:
    errors = gpu.find("ecc_errors")
    return {
        "enabled": _flag(gpu, "ecc_mode/current_ecc"),
        "volatile": _ecc_block(None if errors is None else errors.find("volatile")),
        "aggregate": _ecc_block(None if errors is None else errors.find("aggregate")),
        "sram_threshold_exceeded": _flag(errors, "aggregate/sram_threshold_exceeded"),
    }


def _remapped(gpu: ET.Element) -> dict[str, Any]:
    section = gpu.find("remapped_rows")
    return {
        "correctable": _count(section, "remapped_row_corr"),
        "uncorrectable": _count(section, "remapped_row_unc"),
        "pending": _flag(section, "remapped_row_pending"),
        "failure": _flag(section, "remapped_row_failure"),
    }


def _retired(gpu: ET.Element) -> dict[str, Any]:
    section = gpu.find("retired_pages")
    pending = [_flag(section, "pending_blacklist"), _flag(section, "pending_retirement")]
    known = [p for p in pending if p is not None]
    return {
        "single_bit": _count(section, "multiple_single_bit_retirement/retired_count"),
        "double_bit": _count(section, "double_bit_retirement/retired_count"),
        "pending": any(known) if known else None,
    }


def health_from_root(root: ET.Element) -> list[dict[str, Any]]:
    """Per GPU of a parsed ``<nvidia_smi_log>``, in order: ``{index, uuid, pci_bus_id, pcie:
    {gen_current, gen_max, gen_device_max, gen_host_max, width_current, width_max, replay_counter,
    replay_rollover_counter}, remapped_rows: {correctable, uncorrectable, pending, failure}, ecc:
    {enabled, volatile: {correctable, uncorrectable, sram_correctable, sram_uncorrectable,
    dram_correctable, dram_uncorrectable}, aggregate: {same}, sram_threshold_exceeded},
    retired_pages: {single_bit, double_bit, pending}, recovery_action, fabric: {state, status}}``
    (recovery_action: the driver's words, None when it does not report one; fabric: None when the GPU is
    on no NVSwitch fabric). ``correctable``/``uncorrectable`` are the
    SRAM + DRAM totals (pre-Ampere: the single/double-bit totals)."""
    gpus = root.findall("gpu")
    if not gpus:
        raise ParseError("%s: no <gpu> element in output" % TOOL)
    result = []
    for index, gpu in enumerate(gpus):
        pci = gpu.find("pci")
        bus_id = nvidia_smi._clean(pci.findtext("pci_bus_id") if pci is not None else None)
        result.append(
            {
                "index": index,
                "uuid": nvidia_smi._clean(gpu.findtext("uuid")),
                "pci_bus_id": bus_id if bus_id is not None else nvidia_smi._clean(gpu.get("id")),
                "pcie": _pcie(gpu),
                "remapped_rows": _remapped(gpu),
                "ecc": _ecc(gpu),
                "retired_pages": _retired(gpu),
                "recovery_action": _recovery_action(gpu),
                "fabric": _fabric(gpu),
            }
        )
    return result


@guard(ParseError, TOOL)
def parse_health_xml(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi -q -x`` text -> :func:`health_from_root` of it."""
    return health_from_root(nvidia_smi._safe_xml_root(text))
