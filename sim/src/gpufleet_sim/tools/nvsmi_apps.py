"""`nvidia-smi --query-compute-apps=FIELDS --format=csv[,noheader][,nounits]`: the processes with a compute
context on the GPUs.

Field names, aliases and the header as `nvidia-smi --help-query-compute-apps` and the 590-driver capture
print them (tests/fixtures/real/nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-FULL-capture.txt: the header
alone on an idle node, one row per process under load, "2566 MiB"). The simulator keeps no process table
per GPU: a GPU whose memory a process holds (a vLLM engine, vllm_engine.claim_memory) or that runs
requests (its thermal load) shows one process holding all of that memory, its pid and name not modelled
([N/A]). It is the same "in use" that gpu_reset.busy refuses a reset for, persistence mode aside (the
persistence daemon holds no compute context, so it is never listed here).
"""

from __future__ import annotations

import datetime

from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c

# canonical name first, then aliases; the header unit
_FIELDS: dict[str, tuple[str, str]] = {
    "timestamp": ("timestamp", ""),
    "gpu_name": ("gpu_name", ""),
    "gpu_bus_id": ("gpu_bus_id", ""),
    "gpu_serial": ("gpu_serial", ""),
    "gpu_uuid": ("gpu_uuid", ""),
    "pid": ("pid", ""),
    "process_name": ("process_name", ""),
    "name": ("process_name", ""),
    "used_gpu_memory": ("used_gpu_memory", "MiB"),
    "used_memory": ("used_gpu_memory", "MiB"),
}


def parse_fields(query: str) -> list[str]:
    fields = []
    for raw in query.split(","):
        name = raw.strip()
        if name not in _FIELDS:
            raise c.ToolError(f'Field "{name}" is not a valid field to query.\n\n', c.RC_INVALID_ARGUMENT)
        fields.append(_FIELDS[name][0])
    return fields


def in_use(gpu: c.Gpu) -> bool:
    """A process holds a compute context on the GPU (its memory, or requests running on it)."""
    load = gpu.get("load") or {}
    return int(gpu.get("memory_used_mib", 0)) > 0 or int(load.get("requests", 0)) > 0


def _value(field: str, gpu: c.Gpu, stamp: str) -> str:
    values = {
        "timestamp": stamp,
        "gpu_name": str(gpu["name"]),
        "gpu_bus_id": str(gpu["pci_bus_id"]),
        "gpu_serial": str(gpu["serial"]),
        "gpu_uuid": str(gpu["uuid"]),
        "pid": f"[{c.NA}]",
        "process_name": f"[{c.NA}]",
        "used_gpu_memory": str(int(gpu.get("memory_used_mib", 0))),
    }
    return values[field]


def render(
    selected: list[tuple[int, c.Gpu]], fields: list[str], header: bool, units: bool, stamp: str
) -> str:
    lines = []
    if header:
        lines.append(", ".join(f + (f" [{_FIELDS[f][1]}]" if _FIELDS[f][1] else "") for f in fields))
    for _, gpu in selected:
        if not in_use(gpu):
            continue
        cells = []
        for field in fields:
            value = _value(field, gpu, stamp)
            unit = _FIELDS[field][1]
            cells.append(f"{value} {unit}" if units and unit else value)
        lines.append(", ".join(cells))
    return "".join(line + "\n" for line in lines)


def query(state: State, selected: list[tuple[int, c.Gpu]], spec: str, header: bool, units: bool) -> str:
    stamp = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return render(selected, parse_fields(spec), header, units, stamp)
