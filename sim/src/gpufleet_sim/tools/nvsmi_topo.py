"""`nvidia-smi topo -m`: the tab-separated matrix of the 590-era drivers.

Byte layout as on tests/fixtures/real/topo-matrix/aiconfigurator-gb200-*.txt (SHA-checked capture):
header wrapped in ESC[4m..ESC[0m after a leading tab, " X " on the diagonal, GPU rows ending
"<cpus>\\t<numa>\\t\\tN/A", NIC rows ending in four empty cells, the Legend block, then the NIC Legend
and a trailing blank line. Without NICs the output ends after the Legend (single-GPU utku capture).
"""

from __future__ import annotations

from typing import Any

from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _pcie_path(a: dict[str, Any], b: dict[str, Any]) -> str:
    """PIX under one PCIe switch, NODE across switches of one NUMA node, SYS across NUMA nodes."""
    if a["switch"] == b["switch"]:
        return "PIX"
    return "NODE" if a["numa_node"] == b["numa_node"] else "SYS"


def _gpu_pair(a: c.Gpu, b: c.Gpu) -> str:
    if a["nvlink_domain"] == b["nvlink_domain"]:
        return f"NV{min(int(a['nvlink_count']), int(b['nvlink_count']))}"
    return _pcie_path(a, b)


def render(state: State, gpus: list[c.Gpu]) -> str:
    nics = sorted(state.get("nics", []), key=lambda nic: str(nic["pci_bus_id"]))
    devices: list[tuple[str, dict[str, Any]]] = [(f"GPU{i}", g) for i, g in enumerate(gpus)]
    devices += [(f"NIC{i}", n) for i, n in enumerate(nics)]
    columns = [name for name, _ in devices] + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    lines = ["\t\x1b[4m" + "\t".join(columns) + "\x1b[0m"]
    for row, (name, dev) in enumerate(devices):
        cells = [
            _cell(row, col, dev, other, row < len(gpus), col < len(gpus))
            for col, (_, other) in enumerate(devices)
        ]
        if row < len(gpus):
            numa = int(dev["numa_node"])
            tail = f"\t{c.cpulist(state, numa)}\t{numa}\t\tN/A"
        else:
            tail = "\t\t\t\t"
        lines.append(name + "\t" + "\t".join(cells) + tail)
    text = "\n".join(lines) + "\n" + LEGEND
    if nics:
        text += (
            "\nNIC Legend:\n\n" + "".join(f"  NIC{i}: {nic['ibdev']}\n" for i, nic in enumerate(nics)) + "\n"
        )
    return text


def _cell(row: int, col: int, a: dict[str, Any], b: dict[str, Any], a_gpu: bool, b_gpu: bool) -> str:
    if row == col:
        return " X "
    if a_gpu and b_gpu:
        return _gpu_pair(a, b)
    return _pcie_path(a, b)
