# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests ``all_reduce_perf`` output parsed: the result table, the average bus bandwidth, the
devices (rank -> GPU) and the data errors (``#wrong``).

:func:`parse_all_reduce` reads the text the benchmark prints on stdout (mpirun or ``-g N``). Lines
it does not know are left alone: NCCL INFO/WARN logging, ``NCCL version ...``, mpirun's own
messages and comments an operator added all mix into that stream. What it needs is there or it
raises ParseError naming the tool: at least one result row, and exactly one ``# Avg bus
bandwidth`` line (printed once, at the end of a run that finished). A line shaped like a result
row (a reduction in its fourth or fifth column) that does not read as one is refused, so a damaged
row cannot drop out silently; numbers are ASCII digits with an optional fraction.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import guard

TOOL = "all_reduce_perf"

# nccl-tests' reduction names (-o): a result row has one of them after size, count and type.
REDOPS = frozenset(("sum", "prod", "min", "max", "avg", "mulsum", "all", "none"))

_UINT = re.compile(r"^[0-9]+$")
_DECIMAL = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")
_ROOT = re.compile(r"^-?[0-9]+$")
_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")
# '#  Rank  0 Group  0 Pid  23690 on test-h200-deb device  0 [0x00] NVIDIA H200'; older releases
# have no Group column; a Markdown copy can lose the leading '#'.
_DEVICE = re.compile(
    r"^#?\s*Rank\s+([0-9]+)\s+(?:Group\s+([0-9]+)\s+)?Pid\s+([0-9]+)\s+on\s+(\S+)\s+device\s+([0-9]+)"
    r"\s+\[([^\]\s]+)\]\s+(.*?)\s*$"
)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*$")
_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*([0-9]+)\s+(OK|FAILED)\s*$")
_NCCL_VERSION = re.compile(r"^#?\s*NCCL version (\S+)\s*$")


class ParseError(ValueError):
    """Raised when all_reduce_perf output is empty, cut or not in the benchmark's format."""


def _number(token: str, what: str, pattern: re.Pattern[str] = _DECIMAL) -> float:
    if not pattern.match(token):
        raise ValueError("%s %r is not a number" % (what, token))
    return float(token)


def _wrong(token: str) -> int | None:
    """#wrong: a count, or N/A where the test does not check (in-place of some collectives)."""
    if token == "N/A":
        return None
    return int(_number(token, "#wrong", _UINT))


def _half(tokens: list[str]) -> dict[str, Any]:
    time_us, algbw, busbw, wrong = tokens
    return {
        "time_us": _number(time_us, "time"),
        "algbw_gbps": _number(algbw, "algbw"),
        "busbw_gbps": _number(busbw, "busbw"),
        "wrong": _wrong(wrong),
    }


def _row(tokens: list[str]) -> dict[str, Any]:
    """size count type redop [root] then time algbw busbw #wrong twice (out-of-place, in-place)."""
    has_root = len(tokens) == 13
    if len(tokens) not in (12, 13):
        raise ValueError("%d columns, not 12 or 13" % len(tokens))
    head, tail = tokens[: 5 if has_root else 4], tokens[5 if has_root else 4 :]
    if not _TYPE.match(head[2]) or head[3] not in REDOPS:
        raise ValueError("type %r / reduction %r" % (head[2], head[3]))
    if has_root and not _ROOT.match(head[4]):
        raise ValueError("root %r is not a rank" % head[4])
    return {
        "size_bytes": int(_number(head[0], "size", _UINT)),
        "count": int(_number(head[1], "count", _UINT)),
        "type": head[2],
        "redop": head[3],
        # -1: the collective has no root (all-reduce); None also where the release has no column.
        "root": int(head[4]) if has_root and head[4] != "-1" else None,
        "out_of_place": _half(tail[:4]),
        "in_place": _half(tail[4:]),
    }


def _looks_like_row(tokens: list[str]) -> bool:
    return len(tokens) >= 8 and (
        tokens[3] in REDOPS or tokens[2] in REDOPS or _UINT.match(tokens[0]) is not None
    )


@guard(ParseError, TOOL, complete=True)
def parse_all_reduce(text: str) -> dict[str, Any]:
    """all_reduce_perf stdout -> ``{rows, avg_busbw_gbps, max_busbw_gbps, devices, wrong_rows,
    out_of_bounds, bounds_ok, nccl_version}``.

    ``rows``: ``[{size_bytes, count, type, redop, root, out_of_place: {time_us, algbw_gbps,
    busbw_gbps, wrong}, in_place: {same}}]`` in the order printed (``root`` None for a collective
    without one, as all-reduce, or a release without the column; ``wrong`` None where the benchmark
    printed N/A). ``avg_busbw_gbps``: the ``# Avg bus bandwidth`` figure (GB/s, averaged over
    every size and both halves).
    ``max_busbw_gbps``: the largest busbw of any row. ``devices``: ``[{rank, group, pid, host,
    device, bus_id, name}]`` from the ``Using devices`` block (empty when the run did not print
    it). ``wrong_rows``: the sizes whose out-of-place or in-place ``#wrong`` is above 0 (data
    corrupted in flight). ``out_of_bounds``/``bounds_ok``: the ``# Out of bounds values`` line,
    None when absent."""
    rows: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    avg: float | None = None
    out_of_bounds: int | None = None
    bounds_ok: bool | None = None
    version: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        device = _DEVICE.match(line)
        if device:
            rank, group, pid, host, index, bus_id, name = device.groups()
            devices.append(
                {
                    "rank": int(rank),
                    "group": None if group is None else int(group),
                    "pid": int(pid),
                    "host": host,
                    "device": int(index),
                    "bus_id": bus_id,
                    "name": name,
                }
            )
            continue
        average = _AVG.match(stripped)
        if average:
            if avg is not None:
                raise ParseError(
                    "%s: a second '# Avg bus bandwidth' line (line %d): two runs in one output?"
                    % (TOOL, number)
                )
            avg = _number(average.group(1), "Avg bus bandwidth")
            continue
        bounds = _BOUNDS.match(stripped)
        if bounds:
            out_of_bounds, bounds_ok = int(bounds.group(1)), bounds.group(2) == "OK"
            continue
        release = _NCCL_VERSION.match(stripped)
        if release:
            version = release.group(1)
            continue
        if stripped.startswith("#"):
            continue
        tokens = stripped.split()
        if not _looks_like_row(tokens):
            continue
        try:
            rows.append(_row(tokens))
        except ValueError as exc:
            raise ParseError(
                "%s: line %d is not a result row (%s): %r" % (TOOL, number, exc, stripped[:100])
            ) from None
    if not rows:
        raise ParseError("%s: no result row (the benchmark did not run a size)" % TOOL)
    if avg is None:
        raise ParseError("%s: no '# Avg bus bandwidth' line (the run did not finish)" % TOOL)
    ranks = [device["rank"] for device in devices]
    if len(set(ranks)) != len(ranks):
        raise ParseError("%s: a rank is listed twice under 'Using devices'" % TOOL)
    return {
        "rows": rows,
        "avg_busbw_gbps": avg,
        "max_busbw_gbps": max(
            max(r["out_of_place"]["busbw_gbps"], r["in_place"]["busbw_gbps"]) for r in rows
        ),
        "devices": devices,
        "wrong_rows": [
            r["size_bytes"]
            for r in rows
            if (r["out_of_place"]["wrong"] or 0) > 0 or (r["in_place"]["wrong"] or 0) > 0
        ],
        "out_of_bounds": out_of_bounds,
        "bounds_ok": bounds_ok,
        "nccl_version": version,
    }
