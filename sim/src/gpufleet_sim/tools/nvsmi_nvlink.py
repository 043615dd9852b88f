"""`nvidia-smi nvlink -s|--status` and `nvidia-smi nvlink -e|--errorcounters`, with `-i ID` and `-l LINK`.

Layout of the real captures (tests/fixtures/real, INDEX.md): one ``GPU i: <name> (UUID: ...)`` line per
GPU, then its links indented with a tab and a space. `-s`: ``Link N: 53.125 GB/s``, or
``Link N: <inactive>`` for a link that is down, and for a GPU whose links are all down the one line
``NVML: Unable to retrieve NVLink information as all links are inactive`` (Azure's bad capture).
`-e`: per link ``Replay Errors``, ``Recovery Errors`` and ``CRC Errors``, each link followed by an
empty line (the 535-driver A100 loop capture; no real `-e` from a newer driver was found, so the
newer drivers' extra counters are not printed).

Per-link speeds are the profile's ``nvlink_speed_gbps``: 26.562 GB/s for NVLink 4 (the real H200
capture) and 53.125 GB/s for NVLink 5 (a real 8x B300 SXM6 AC `nvidia-smi nvlink --status`, Korean
setup notes of a Dell B300 host, search-index id 63125688786: 18 links at 53.125 GB/s per GPU).
A GPU's links live in its state as ``nvlink: {inactive: [link, ...], errors: {"<link>": {replay,
recovery, crc}}}``; a link not listed is active with zero errors. A link whose CRC errors rise (the
fault nvlink-crc-storm, sim/faults_nvswitch.py) has ``nvlink.crc_storm: {link, t, count, idle_per_s,
load_per_s}``: each `-e` read adds ``(idle_per_s + load_per_s * utilization) * elapsed`` to ``count`` (the
GPU's utilization at the read, as sim/roce_traffic.py advances a port's counters) and saves it, so the
count only grows and grows fastest while the GPU is loaded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpufleet_sim import state as sim_state
from gpufleet_sim import thermal
from gpufleet_sim.tools import nvsmi_common as c

ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inactive"
COUNTERS = (("replay", "Replay Errors"), ("recovery", "Recovery Errors"), ("crc", "CRC Errors"))
_INDENT = "\t "

_MODES = {"-s": "status", "--status": "status", "-e": "errors", "--errorcounters": "errors"}
_VALUED = {"-i": "id", "--id": "id", "-l": "link", "--link": "link"}


def links(gpu: c.Gpu) -> dict[str, Any]:
    """The GPU's NVLink state (inactive links, sparse error counters); empty on a GPU built without it."""
    value: dict[str, Any] = gpu.get("nvlink") or {}
    return value


def run(argv: list[str], node_dir: Path) -> str:
    mode, ids, link = _parse(argv)
    state = sim_state.load(node_dir)  # links do not depend on the thermal model: no need to run it
    if mode == "errors" and any(links(gpu).get("crc_storm") for gpu in state.get("gpus", [])):
        with sim_state.locked(node_dir) as locked:
            now = time.time()
            for gpu in locked["gpus"]:
                advance_crc_storm(gpu, now)
            state = locked
    selected = c.select_gpus(state, ids)
    if link is not None and any(link >= int(gpu["nvlink_count"]) for _, gpu in selected):
        raise _invalid()
    render = status if mode == "status" else error_counters
    return "".join(render(index, gpu, link) for index, gpu in selected)


def _invalid() -> c.ToolError:
    return c.ToolError(
        "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
        c.RC_INVALID_ARGUMENT,
    )


def _parse(argv: list[str]) -> tuple[str, str | None, int | None]:
    modes: list[str] = []
    values: dict[str, str] = {}
    pos = 0
    while pos < len(argv):
        name, eq, inline = argv[pos].partition("=") if argv[pos].startswith("--") else (argv[pos], "", "")
        if not eq and name in _MODES:
            modes.append(_MODES[name])
        elif name in _VALUED:
            if not eq:
                pos += 1
                if pos >= len(argv):
                    raise _invalid()
                inline = argv[pos]
            values[_VALUED[name]] = inline
        else:
            raise _invalid()
        pos += 1
    if len(modes) != 1:
        raise _invalid()
    link = values.get("link")
    if link is not None and not link.isdigit():
        raise _invalid()
    return modes[0], values.get("id"), None if link is None else int(link)


def advance_crc_storm(gpu: c.Gpu, now: float) -> None:
    """Adds the CRC errors of the GPU's storming link since its last read (see the module docstring)."""
    storm = links(gpu).get("crc_storm")
    if not storm:
        return
    elapsed = max(now - float(storm["t"]), 0.0)
    busy = thermal.utilization(gpu, now) / 100.0
    storm["count"] = (
        float(storm["count"]) + (float(storm["idle_per_s"]) + float(storm["load_per_s"]) * busy) * elapsed
    )
    storm["t"] = now


def _storm(nvlink: dict[str, Any], link: int) -> int:
    storm = nvlink.get("crc_storm") or {}
    return int(float(storm["count"])) if storm and int(storm["link"]) == link else 0


def _header(index: int, gpu: c.Gpu) -> str:
    return f"GPU {index}: {gpu['name']} (UUID: {gpu['uuid']})\n"


def _numbers(gpu: c.Gpu, link: int | None) -> list[int]:
    return [link] if link is not None else list(range(int(gpu["nvlink_count"])))


def status(index: int, gpu: c.Gpu, link: int | None = None) -> str:
    inactive = {int(n) for n in links(gpu).get("inactive", [])}
    numbers = _numbers(gpu, link)
    if len(inactive) >= int(gpu["nvlink_count"]):
        return _header(index, gpu) + ALL_INACTIVE + "\n"
    speed = f"{gpu['nvlink_speed_gbps']} GB/s"
    lines = [f"{_INDENT}Link {n}: {'<inactive>' if n in inactive else speed}\n" for n in numbers]
    return _header(index, gpu) + "".join(lines)


def error_counters(index: int, gpu: c.Gpu, link: int | None = None) -> str:
    nvlink = links(gpu)
    if len({int(n) for n in nvlink.get("inactive", [])}) >= int(gpu["nvlink_count"]):
        return _header(index, gpu) + ALL_INACTIVE + "\n"
    errors = nvlink.get("errors", {})
    out = [_header(index, gpu)]
    for n in _numbers(gpu, link):
        counts = dict(errors.get(str(n), {}))
        counts["crc"] = int(counts.get("crc", 0)) + _storm(nvlink, n)
        out.extend(f"{_INDENT}Link {n}: {label}: {int(counts.get(key, 0))}\n" for key, label in COUNTERS)
        out.append("\n")
    return "".join(out)
