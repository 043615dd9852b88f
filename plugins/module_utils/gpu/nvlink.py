# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi nvlink -s`` (``--status``) and ``nvidia-smi nvlink -e`` (``--errorcounters``) parsed.

- :func:`parse_status`: per GPU (index, name, UUID) every link with whether it is active and its
  speed in GB/s. nvidia-smi prints ``Link N: <inactive>`` for a link that is down, and for a GPU
  whose links are all down one line ``NVML: Unable to retrieve NVLink information as all links are
  inactive`` instead of its links (``all_inactive``).
- :func:`parse_error_counters`: per GPU every link's error counters, named in snake case from
  nvidia-smi's label (``Replay Errors`` -> ``replay``, ``Recovery Errors`` -> ``recovery``,
  ``CRC Errors`` -> ``crc``; a label this module does not know keeps its snake-case name).
- :func:`error_totals`: per GPU the sum over its links of its CRC, replay and recovery errors, the
  three counters DCGM's NVLink health watch judges (the CRC count is every counter whose label says
  CRC: ``CRC Errors``, or a flit and a data CRC counter where a driver prints them apart).

Both tools print one ``GPU i: <name> (UUID: GPU-...)`` line and then its links indented (a tab
and a space on real drivers, spaces in copies). A line that is neither, a link before any GPU, a
GPU or link twice, or a reading that is not ASCII digits raises ParseError naming the command:
a damaged report must not read as a healthy link.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard

Func = TypeVar("Func", bound=Callable[..., Any])

STATUS_TOOL = "nvidia-smi nvlink -s"
ERRORS_TOOL = "nvidia-smi nvlink -e"


class ParseError(ValueError):
    """Raised when nvidia-smi nvlink output is empty, cut or not in the tool's format."""


def _guard(tool: str) -> Callable[[Func], Func]:
    """parsing.guard with this module's ParseError; nvidia-smi ends every line with a newline, so a
    report cut inside its last reading ('25 GB/s' read as '2') is refused."""
    return guard(ParseError, tool, complete=True)


# re.ASCII: \d and \s match ASCII only, so '١٢' (Arabic-Indic digits) is not read as 12.
_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Za-z-]+)\)$", re.ASCII)
_LINK_SPEED = re.compile(r"^\s+Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|(<inactive>))$", re.ASCII)
_LINK_COUNTER = re.compile(r"^\s+Link (\d+): ([A-Za-z][A-Za-z0-9 ._/()-]*?): (\d+|N/A)$", re.ASCII)
ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inactive"
# No GPU has more links than this (B200: 18); a larger number is damage.
MAX_LINKS = 64


def _label(text: str) -> str:
    """'Replay Errors' -> 'replay', 'CRC Data Errors' -> 'crc_data'."""
    words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
    if words and words[-1] in ("errors", "error"):
        words = words[:-1]
    return "_".join(words) or "errors"


def _walk(
    text: str, tool: str, link_line: re.Pattern[str]
) -> list[tuple[dict[str, Any], list[re.Match[str]]]]:
    """The report split into GPU header records and the link lines matched under each."""
    gpus: list[tuple[dict[str, Any], list[re.Match[str]]]] = []
    seen: set[int] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        header = _GPU.match(line)
        if header:
            index = int(header.group(1))
            if index in seen:
                raise ParseError("%s: GPU %d is reported twice (line %d)" % (tool, index, number))
            seen.add(index)
            record = {"index": index, "name": header.group(2), "uuid": header.group(3), "all_inactive": False}
            gpus.append((record, []))
            continue
        if not gpus:
            raise ParseError("%s: line %d comes before any 'GPU i:' line: %r" % (tool, number, line[:80]))
        if line.strip() == ALL_INACTIVE:
            gpus[-1][0]["all_inactive"] = True
            continue
        match = link_line.match(line)
        if not match:
            raise ParseError("%s: line %d is not a GPU or link line: %r" % (tool, number, line[:80]))
        if int(match.group(1)) >= MAX_LINKS:
            raise ParseError(
                "%s: link %s of GPU %d is past %d" % (tool, match.group(1), gpus[-1][0]["index"], MAX_LINKS)
            )
        gpus[-1][1].append(match)
    if not gpus:
        raise ParseError("%s: no 'GPU i: <name> (UUID: ...)' line" % tool)
    for record, links in gpus:
        if record["all_inactive"] and links:
            raise ParseError("%s: GPU %d lists links after saying all are inactive" % (tool, record["index"]))
    return gpus


@_guard(STATUS_TOOL)
def parse_status(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s`` -> ``[{index, name, uuid, all_inactive, links: [{link, active,
    speed_gbps}]}]`` in the report's order; ``speed_gbps`` is None for an inactive link; a GPU
    whose links are all down has ``all_inactive`` True and no links."""
    result = []
    for record, matches in _walk(text, STATUS_TOOL, _LINK_SPEED):
        links: dict[int, dict[str, Any]] = {}
        for match in matches:
            link = int(match.group(1))
            if link in links:
                raise ParseError(
                    "%s: GPU %d link %d is reported twice" % (STATUS_TOOL, record["index"], link)
                )
            speed = None if match.group(3) else float(match.group(2))
            links[link] = {"link": link, "active": speed is not None, "speed_gbps": speed}
        result.append(dict(record, links=list(links.values())))
    return result


@_guard(ERRORS_TOOL)
def parse_error_counters(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -e`` -> ``[{index, name, uuid, all_inactive, links: [{link, counters:
    {replay, recovery, crc, ...}}]}]``; a counter nvidia-smi prints as N/A is None."""
    result = []
    for record, matches in _walk(text, ERRORS_TOOL, _LINK_COUNTER):
        links: dict[int, dict[str, int | None]] = {}
        for match in matches:
            link, name = int(match.group(1)), _label(match.group(2))
            counters = links.setdefault(link, {})
            if name in counters:
                raise ParseError(
                    "%s: GPU %d link %d reports %r twice"
                    % (ERRORS_TOOL, record["index"], link, match.group(2))
                )
            counters[name] = None if match.group(3) == "N/A" else int(match.group(3))
        result.append(dict(record, links=[{"link": k, "counters": v} for k, v in links.items()]))
    return result


# error_totals' kinds, in the order DCGM's NVLink health watch reads them.
ERROR_KINDS = ("crc", "replay", "recovery")


def _kind(counter: str) -> str | None:
    if "crc" in counter.split("_"):
        return "crc"
    return counter if counter in ("replay", "recovery") else None


def error_totals(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """parse_error_counters' GPUs -> ``[{index, uuid, crc, replay, recovery}]``: each kind summed over
    the GPU's links; None where no link reports that kind (N/A, or all links down)."""
    out = []
    for gpu in gpus:
        totals: dict[str, int | None] = dict.fromkeys(ERROR_KINDS)
        for link in gpu.get("links") or []:
            for counter, value in (link.get("counters") or {}).items():
                kind = _kind(counter)
                if kind is not None and value is not None:
                    totals[kind] = (totals[kind] or 0) + value
        out.append(dict(totals, index=gpu["index"], uuid=gpu["uuid"]))
    return out
