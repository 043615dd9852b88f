# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The odd node out: a node whose driver, CUDA, VBIOS or NIC firmware differs from its peers.

Peers are the run's nodes with the same GPU product and count (node_health's ``gpufleet_versions``).
Within a group of at least MIN_PEERS nodes, the value most of them share is the profile's; a node
with another value fails ``fleet.versions[<field>]`` naming both and how many peers agree. With
fewer peers, or no majority, nothing is judged (a check says why): two nodes that differ cannot say
which of them is odd.

Pure; runs on the controller (the module is delegated to localhost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import check

FIELDS = {
    "driver": "GPU driver",
    "cuda": "CUDA version",
    "vbios": "GPU VBIOS",
    "nic_firmware": "NIC firmware",
}
# Below this many peers no majority says what the profile's version is.
MIN_PEERS = 3


def _key(versions: Mapping[str, Any]) -> tuple[str, int]:
    return (" + ".join(versions.get("gpu_product") or []), int(versions.get("gpu_count") or 0))


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def judge(host: str, fleet: Mapping[str, Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """``host``'s checks against its peers in ``fleet`` ({host: gpufleet_versions or None})."""
    mine = fleet.get(host)
    if not mine:
        return []
    key = _key(mine)
    peers = [v for v in fleet.values() if v and _key(v) == key]
    return _judged(host, mine, len(peers), _counts(peers))


def judge_all(fleet: Mapping[str, Mapping[str, Any] | None]) -> dict[str, list[dict[str, Any]]]:
    """Every host's ``judge`` at once, each group of peers counted once (a whole fleet on the controller:
    linear in its nodes, where a judge per host is quadratic). Hosts without versions are left out."""
    groups: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for host, versions in fleet.items():
        if versions:
            groups.setdefault(_key(versions), {})[host] = versions
    out = {}
    for peers in groups.values():
        counts = _counts(list(peers.values()))
        for host, versions in peers.items():
            out[host] = _judged(host, versions, len(peers), counts)
    return out


def _counts(peers: list[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    """How many of the peers run each value of each field (in the peers' order: ties go to the first)."""
    return {field: Counter(_shown(v.get(field)) for v in peers) for field in FIELDS}


def _judged(
    host: str, mine: Mapping[str, Any], peers: int, counted: dict[str, Counter[str]]
) -> list[dict[str, Any]]:
    """``host``'s checks, given how many peers it has (itself included) and their counts (_counts)."""
    key = _key(mine)
    product = "%d x %s" % (key[1], key[0] or "unknown GPU")
    if peers < MIN_PEERS:
        return [
            check(
                "fleet.versions",
                True,
                peers,
                MIN_PEERS,
                "nodes",
                "%s: %d node(s) of %s in this run, fewer than %d: versions not compared"
                % (host, peers, product, MIN_PEERS),
            )
        ]
    out = []
    for field, what in FIELDS.items():
        counts = counted[field]
        common, agreeing = counts.most_common(1)[0]
        value = _shown(mine.get(field))
        if agreeing * 2 <= peers:
            out.append(
                check(
                    "fleet.versions[%s]" % field,
                    True,
                    value,
                    None,
                    "",
                    "%s: the %d nodes of %s do not agree on one %s (%s): not judged"
                    % (
                        host,
                        peers,
                        product,
                        what,
                        "; ".join("%s on %d" % kv for kv in counts.most_common()),
                    ),
                )
            )
            continue
        ok = value == common
        out.append(
            check(
                "fleet.versions[%s]" % field,
                ok,
                value,
                common,
                "",
                "%s: %s %s, as %d of the %d nodes of %s" % (host, what, value, agreeing, peers, product)
                if ok
                else "%s: %s %s differs from the %s that %d of the %d nodes of %s run: the odd node out "
                "(an update that missed it, or a part swapped in maintenance); bring it to %s"
                % (host, what, value, common, agreeing, peers, product, common),
            )
        )
    return out
