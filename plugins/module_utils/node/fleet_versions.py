# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The odd node out: a node whose driver, CUDA, VBIOS or NIC firmware differs from its peers, or from
the fleet's known versions.

Peers are the run's nodes with the same GPU product (node_health's ``gpufleet_versions``; not the same
GPU count: a node with a GPU gone is judged with its peers, its count is health.gpu_count's). Within a
group of at least MIN_PEERS nodes, the value most of them share is the profile's; a node with another
value fails ``fleet.versions[<field>]`` naming both and how many peers agree. With fewer peers, or no
majority, the fleet's known versions (SETTING: per GPU product the expected driver, cuda, vbios,
nic_firmware) decide: a gate limited to the one or two nodes back from maintenance still finds the odd
node out. Without them nothing is judged (a check says why and names SETTING): two nodes that differ
cannot say which of them is odd.

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
# The inventory setting of the fleet's known versions (thermal_gate's input; drift reads the same).
SETTING = "thermal_gate_fleet_versions"


def _key(versions: Mapping[str, Any]) -> str:
    """The peer group: the node's GPU product(s), as its known versions are keyed."""
    return " + ".join(versions.get("gpu_product") or [])


def validate_known(known: Any) -> list[str]:
    """What is wrong with SETTING's value, one sentence each naming the entry ([] when it is usable):
    a mapping of GPU product (as nvidia-smi names it) to a mapping of some of FIELDS, each a version
    string (vbios and nic_firmware: a string or a list of the node's distinct versions)."""
    if not isinstance(known, Mapping):
        return ["%s must map a GPU product to its versions, got %s" % (SETTING, type(known).__name__)]
    errors = []
    allowed = ", ".join(FIELDS)
    for product, expected in known.items():
        where = "%s[%r]" % (SETTING, product)
        if not isinstance(product, str) or not product.strip():
            errors.append("%s: the GPU product must be its name as nvidia-smi prints it" % where)
        if not isinstance(expected, Mapping) or not expected:
            errors.append("%s must map some of %s to the expected version" % (where, allowed))
            continue
        for field, value in expected.items():
            if field not in FIELDS:
                errors.append("%s: %r is not one of %s" % (where, field, allowed))
            elif not _version_text(value, listed=field in ("vbios", "nic_firmware")):
                errors.append(
                    "%s[%s] must be a version string%s (quote it: 13.0 in YAML is a number), got %r"
                    % (
                        where,
                        field,
                        " or a list of them" if field in ("vbios", "nic_firmware") else "",
                        value,
                    )
                )
    return errors


def _version_text(value: Any, listed: bool) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return listed and isinstance(value, list) and bool(value) and all(_version_text(v, False) for v in value)


def _expected(known: Mapping[str, Any] | None, key: str) -> dict[str, str]:
    """The known versions of GPU product ``key``, each as _shown prints the node's (a valid SETTING)."""
    found = (known or {}).get(key) or {}
    return {f: _shown(sorted(set(v)) if isinstance(v, list) else v) for f, v in found.items()}


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def judge(
    host: str, fleet: Mapping[str, Mapping[str, Any] | None], known: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``host``'s checks against its peers in ``fleet`` ({host: gpufleet_versions or None}), and the
    fleet's ``known`` versions (SETTING, valid: validate_known) where the peers cannot say."""
    mine = fleet.get(host)
    if not mine:
        return []
    key = _key(mine)
    peers = [v for v in fleet.values() if v and _key(v) == key]
    return _judged(host, mine, len(peers), _counts(peers), _expected(known, key))


def judge_all(
    fleet: Mapping[str, Mapping[str, Any] | None], known: Mapping[str, Any] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every host's ``judge`` at once, each group of peers counted once (a whole fleet on the controller:
    linear in its nodes, where a judge per host is quadratic). Hosts without versions are left out."""
    groups: dict[str, dict[str, Mapping[str, Any]]] = {}
    for host, versions in fleet.items():
        if versions:
            groups.setdefault(_key(versions), {})[host] = versions
    out = {}
    for key, peers in groups.items():
        counts = _counts(list(peers.values()))
        expected = _expected(known, key)
        for host, versions in peers.items():
            out[host] = _judged(host, versions, len(peers), counts, expected)
    return out


def not_compared(ok: bool, value: Any, limit: Any, unit: str, message: str) -> dict[str, Any]:
    """``fleet.versions``: the node's versions were not compared with its peers' (too few peers and
    no known versions: ok; its versions could not be read, node_versions.read: failed)."""
    return check("fleet.versions", ok, value, limit, unit, message)


def _counts(peers: list[Mapping[str, Any]]) -> dict[str, Counter[str]]:
    """How many of the peers run each value of each field (in the peers' order: ties go to the first)."""
    return {field: Counter(_shown(v.get(field)) for v in peers) for field in FIELDS}


def _judged(
    host: str,
    mine: Mapping[str, Any],
    peers: int,
    counted: dict[str, Counter[str]],
    expected: Mapping[str, str],
) -> list[dict[str, Any]]:
    """``host``'s checks, given how many peers it has (itself included), their counts (_counts) and the
    fleet's known versions of its GPU product (_expected)."""
    product = _key(mine) or "unknown GPU"
    if peers < MIN_PEERS and not expected:
        return [
            not_compared(
                True,
                peers,
                MIN_PEERS,
                "nodes",
                "%s: %d node(s) of %s in this run, fewer than %d, and %s has no versions for it: versions "
                "not compared" % (host, peers, product, MIN_PEERS, SETTING),
            )
        ]
    out = []
    for field, what in FIELDS.items():
        counts = counted[field]
        common, agreeing = counts.most_common(1)[0]
        value = _shown(mine.get(field))
        if peers >= MIN_PEERS and agreeing * 2 > peers:
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
            continue
        why = (
            "%d node(s) of %s in this run, fewer than %d" % (peers, product, MIN_PEERS)
            if peers < MIN_PEERS
            else "the %d nodes of %s do not agree on one %s (%s)"
            % (peers, product, what, "; ".join("%s on %d" % kv for kv in counts.most_common()))
        )
        if field not in expected:
            out.append(
                check(
                    "fleet.versions[%s]" % field,
                    True,
                    value,
                    None,
                    "",
                    "%s: %s, and %s gives no %s for it: not judged" % (host, why, SETTING, what),
                )
            )
            continue
        ok = value == expected[field]
        out.append(
            check(
                "fleet.versions[%s]" % field,
                ok,
                value,
                expected[field],
                "",
                "%s: %s %s, the fleet's known one (%s; %s)" % (host, what, value, SETTING, why)
                if ok
                else "%s: %s %s differs from the fleet's known %s for %s (%s; %s): the odd node out (an "
                "update that missed it, or a part swapped in maintenance); bring it to %s"
                % (host, what, value, expected[field], product, SETTING, why, expected[field]),
            )
        )
    return out
