# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An NCCL all-reduce over every GPU of the node, judged: can the node move data between its GPUs
(and between its baseboards, over the RoCE fabric) at the rate its profile should give?

- :func:`argv`: nccl-tests' ``all_reduce_perf`` over ``gpus`` GPUs in one process, from
  ``min_bytes`` to ``max_bytes`` doubling, under ``timeout`` (coreutils) so a hung collective ends;
- :func:`judge`: nccl_tests.parse_all_reduce's result -> ``health.nccl_busbw`` (the run's average bus
  bandwidth against the profile's floor), ``health.nccl_gpus`` (the GPUs the run used) and
  ``health.nccl_correct`` (no corrupted element, no value out of bounds).

A low bus bandwidth on a node whose two baseboards talk over RoCE is most often the fabric: a
lossy or unmarked RoCE path (the leaves' PFC and ECN), a RoCE link down or retrained slower, or an
NVLink link down inside a baseboard. The message says so and names the checks that tell which.

Pure judgement and argv; runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

# What may explain a low figure, in the order to look.
EXPLAINED_BY = (
    "rdma_link.link_state, fabric.link_rate and fabric.link_flaps (a RoCE link down or slow)",
    "fabric.switch_pfc, fabric.switch_ecn and fabric.retransmits (a lossy or unmarked RoCE path: "
    "`gpufleet switch --check`)",
    "health.nvlink (an NVLink link down inside a baseboard)",
)


def argv(
    binary: str, gpus: int, min_bytes: str, max_bytes: str, timeout_s: int, timeout: str = "timeout"
) -> list[str]:
    """``timeout -k 10 <s> all_reduce_perf -b <min> -e <max> -f 2 -g <gpus> -c 1``."""
    return [
        timeout,
        "-k",
        "10",
        str(timeout_s),
        binary,
        "-b",
        min_bytes,
        "-e",
        max_bytes,
        "-f",
        "2",
        "-g",
        str(gpus),
        "-c",
        "1",
    ]


def judge(
    result: dict[str, Any],
    gpus: int,
    floor_gbps: float,
    fabric: list[dict[str, Any]] | None = None,
    peers: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The run's checks; ``result`` is nccl_tests.parse_all_reduce's, ``fabric`` the checks of the
    node's RoCE ports read around the run (roce_reading.Window): a low figure names the ones that
    failed as its likely cause, else it lists what to look at (EXPLAINED_BY). ``peers`` maps a RoCE
    port to its leaf switch and port (the cabling plan the fabric checks held the node's LLDP reading
    to: ``{"mlx5_4": "leaf02:swp5"}``): a low figure names the leaf and its port beside each port."""
    out = []
    used = len(result.get("devices") or [])
    if used:
        out.append(
            check(
                "health.nccl_gpus",
                used == gpus,
                used,
                gpus,
                "GPUs",
                "all_reduce_perf ran over %d GPUs%s"
                % (used, "" if used == gpus else ", asked for %d" % gpus),
            )
        )
    wrong = result.get("wrong_rows") or []
    bounds = result.get("bounds_ok")
    correct = not wrong and bounds is not False
    out.append(
        check(
            "health.nccl_correct",
            correct,
            len(wrong),
            0,
            "sizes with wrong elements",
            "all_reduce_perf checked every element: none wrong"
            if correct
            else "all_reduce_perf found corrupted data (%s%s): a GPU, NVLink or NIC corrupts data in flight; "
            "run the GPU diagnostics (dcgmi diag -r 3) before it serves"
            % (
                "wrong elements at %s bytes" % ", ".join(str(s) for s in wrong[:5]) if wrong else "",
                "" if bounds is not False else "out-of-bounds values: %s" % result.get("out_of_bounds"),
            ),
        )
    )
    busbw = result["avg_busbw_gbps"]
    ok = busbw >= floor_gbps
    sizes = [r["size_bytes"] for r in result.get("rows") or []]
    span = "%d to %d bytes" % (min(sizes), max(sizes)) if sizes else "no size"
    out.append(
        check(
            "health.nccl_busbw",
            ok,
            busbw,
            floor_gbps,
            "GB/s",
            "all_reduce over %d GPUs (%s): average bus bandwidth %g GB/s, floor %g GB/s%s"
            % (
                used or gpus,
                span,
                busbw,
                floor_gbps,
                "" if ok else _low(fabric or [], peers or {}),
            ),
        )
    )
    return out


def _on_leaf(port: str, peers: Mapping[str, str]) -> str:
    """``mlx5_4 (leaf02:swp5)``, or the port alone where no plan names its leaf port."""
    return "%s (%s)" % (port, peers[port]) if peers.get(port) else port


def _leaves(ports: list[str], peers: Mapping[str, str]) -> list[str]:
    """The leaf switches of these ports, in order, each once (those the plan names)."""
    found: list[str] = []
    for port in ports:
        leaf = (peers.get(port) or "").partition(":")[0]
        if leaf and leaf not in found:
            found.append(leaf)
    return found


def _switch_check(leaves: list[str]) -> str:
    return "`gpufleet switch --check%s`" % (" --limit %s" % ",".join(leaves) if leaves else "")


def _low(fabric: list[dict[str, Any]], peers: Mapping[str, str]) -> str:
    """What a low figure's message adds: the RoCE checks that failed during the run (by check, with
    their ports and each port's leaf port: ``fabric.ecn_loop[mlx5_4 (leaf02:swp5), mlx5_5
    (leaf02:swp6)]``), else where to look, naming the leaf port of each RoCE port the plan knows."""
    failed = [c for c in fabric if not c["ok"]]
    if not failed:
        cabled = ", ".join(_on_leaf(port, peers) for port in peers)
        return ". The GPUs cannot move data at the rate the node should give; look at %s%s" % (
            "; then ".join(EXPLAINED_BY),
            " (its RoCE ports and their leaf ports: %s; %s)"
            % (cabled, _switch_check(_leaves(list(peers), peers)))
            if cabled
            else "",
        )
    ports: dict[str, list[str]] = {}
    for c in failed:
        family, bracket, port = c["name"].partition("[")
        ports.setdefault(family, [])
        if bracket:
            ports[family].append(port.rstrip("]"))
    named = ", ".join(
        "%s[%s]" % (f, ", ".join(_on_leaf(port, peers) for port in p)) if p else f for f, p in ports.items()
    )
    leaves = _leaves([port for p in ports.values() for port in p], peers)
    return (
        ". The RoCE path between the baseboards failed during the all-reduce: %s (%s); fix the fabric "
        "(%s for the leaves' PFC and ECN) and gate again"
        % (named, failed[0]["message"], _switch_check(leaves))
    )
