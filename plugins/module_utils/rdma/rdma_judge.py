# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an mlx5 RoCE port must be, compared with what it is: pure functions, data in, data out.

The rdma_link and rdma_qos modules read a port (module_utils.rdma.rdma_parse), ask these functions what
differs, what to run, what to check and what a boot script must re-apply, and then act. Nothing
here runs a command or touches a file, so plain pytest covers every decision.

Report contract: a change is ``{"setting": "<role>.<name>[<port>]", "from": x, "to": y}``, a check
is ``{"name", "ok", "value", "limit", "unit", "message"}``.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import shlex
from typing import Any

# The one definition of a check (results vocabulary), re-exported under this module's name.
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change, check
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.roce_counters import link_state_check

# NVIDIA's RoCE page, the Documentation= of the RDMA modules' boot units.
ROCE_DOCS = "https://docs.nvidia.com/networking/display/mlnxofedv24010331/rdma+over+converged+ethernet+(roce)"

PRIORITIES = range(8)  # IEEE 802.1p priorities
DSCP_RANGE = range(64)
LINK_TYPES = {"eth": "ETH", "ib": "IB"}
# mlxconfig LINK_TYPE values (raw name or number) -> eth/ib; VPI(3) lets the port choose by cable.
_LINK_TYPE_NAMES = {"ETH": "eth", "IB": "ib", "VPI": "vpi"}
_LINK_TYPE_NUMBERS = {1: "ib", 2: "eth", 3: "vpi"}


def bad_values(values: list[Any] | None, allowed: range) -> list[Any]:
    """The entries of a list option that are not integers in ``allowed`` (empty when all are)."""
    return [v for v in values or [] if isinstance(v, bool) or not isinstance(v, int) or v not in allowed]


def priority_flags(priorities: list[int]) -> list[int]:
    """[3] -> [0, 0, 0, 1, 0, 0, 0, 0]: one flag per priority 0..7."""
    return [1 if prio in priorities else 0 for prio in PRIORITIES]


def enabled_priorities(flags: list[Any] | None) -> list[int] | None:
    """[0, 0, 0, 1, 0, 0, 0, 0] or [False, .., True, ..] -> [3]; None stays None (not readable)."""
    if flags is None:
        return None
    return [prio for prio, on in enumerate(flags) if on]


# ------------------------------------------------------------------ rdma_qos


# The settings rdma_qos manages, in the order it reports and applies them.
QOS_SETTINGS = ("global_pause", "trust", "pfc", "ecn_np", "ecn_rp", "cnp_dscp")


def qos_changes(netdev: str, current: dict[str, Any], desired: dict[str, Any]) -> list[dict[str, Any]]:
    """One change per managed setting that differs; a desired value of None is not managed.

    Both dicts use QOS_SETTINGS keys: trust (str), pfc/ecn_np/ecn_rp (sorted priority lists),
    cnp_dscp (int), global_pause (bool).
    """
    changes = []
    for name in QOS_SETTINGS:
        want = desired.get(name)
        if want is None:
            continue
        have = current.get(name)
        if have != want:
            changes.append(change("rdma_qos.%s[%s]" % (name, netdev), have, want))
    return changes


def mlnx_qos_args(current: dict[str, Any], desired: dict[str, Any]) -> list[str]:
    """The `mlnx_qos -i <if>` options that set what differs of trust and PFC, in that order."""
    args: list[str] = []
    if desired.get("trust") is not None and current.get("trust") != desired["trust"]:
        args += ["--trust", desired["trust"]]
    if desired.get("pfc") is not None and current.get("pfc") != desired["pfc"]:
        args += ["--pfc", ",".join(str(flag) for flag in priority_flags(desired["pfc"]))]
    return args


def ecn_writes(
    ecn_dir: str, current: dict[str, Any], desired: dict[str, Any], only_changed: bool = True
) -> list[tuple[str, str]]:
    """(path, value) writes under the netdev's ``ecn/`` directory for ECN enables and CNP DSCP.

    With only_changed, only the per-priority files whose value differs (what a run must write);
    without, every managed file (what a boot script must write, the kernel having reset them).
    """
    writes: list[tuple[str, str]] = []
    for name, point in (("ecn_np", "roce_np"), ("ecn_rp", "roce_rp")):
        want = desired.get(name)
        if want is None:
            continue
        have = current.get(name) or []
        for prio in PRIORITIES:
            if not only_changed or (prio in want) != (prio in have):
                writes.append(("%s/%s/enable/%d" % (ecn_dir, point, prio), "1" if prio in want else "0"))
    cnp = desired.get("cnp_dscp")
    if cnp is not None and (not only_changed or current.get("cnp_dscp") != cnp):
        writes.append(("%s/roce_np/cnp_dscp" % ecn_dir, str(cnp)))
    return writes


def nvue_snippet(desired: dict[str, Any]) -> list[str]:
    """Read-only: the Cumulus Linux (NVUE) switch-side settings matching a host's QoS plan.

    For the operator to compare with the switch ports facing the node; gpufleet never applies it.
    """
    lines = ["# switch side (Cumulus Linux NVUE), for comparison only: gpufleet does not apply it"]
    lines.append("nv set qos roce mode lossless")
    trust = desired.get("trust")
    if trust is not None:
        lines.append("nv set qos mapping default-global trust %s" % ("l3" if trust == "dscp" else "l2"))
    if desired.get("pfc"):
        lines.append(
            "nv set qos pfc default-global switch-priority %s" % ",".join(str(p) for p in desired["pfc"])
        )
    ecn = sorted(set(desired.get("ecn_np") or []) | set(desired.get("ecn_rp") or []))
    if ecn:
        lines.append(
            "nv set qos congestion-control default-global traffic-class %s ecn enable"
            % ",".join(str(p) for p in ecn)
        )
    lines.append("nv config apply")
    return lines


# ------------------------------------------------------------------ rdma_link


def select_ports(names: dict[str, str | None], wanted: list[str] | None) -> tuple[list[str], list[str]]:
    """(chosen RDMA devices in device order, names that are neither a device nor its netdev).

    ``names`` maps each RDMA device to its netdev; ``wanted`` may name either; empty means all.
    """
    if not wanted:
        return list(names), []
    known = set(names) | {netdev for netdev in names.values() if netdev}
    unknown = [name for name in wanted if name not in known]
    chosen = [ibdev for ibdev, netdev in names.items() if ibdev in wanted or netdev in wanted]
    return chosen, unknown


def mlxconfig_link_param(pci_bus_id: str | None) -> str:
    """LINK_TYPE_P<n> of a PCI function: on mlx5 each port is a function, function 0 is port 1."""
    function = (pci_bus_id or "").rsplit(".", 1)[-1]
    return "LINK_TYPE_P%d" % (int(function) + 1 if function.isdigit() else 1)


def link_type_name(raw: str | None) -> str | None:
    """mlxconfig's 'ETH(2)' / 'IB(1)' / 'VPI(3)' / '2' -> 'eth' / 'ib' / 'vpi'; None stays None."""
    if raw is None:
        return None
    name, _paren, number = raw.partition("(")
    if name.strip().upper() in _LINK_TYPE_NAMES:
        return _LINK_TYPE_NAMES[name.strip().upper()]
    digits = (number.rstrip(")") if number else name).strip()
    return _LINK_TYPE_NUMBERS.get(int(digits)) if digits.isdigit() else None


def link_type_plan(ibdev: str, link_layer: str | None, next_boot: str | None, desired: str) -> dict[str, Any]:
    """What to do about a port's firmware link type.

    ``link_layer`` is what runs now (sysfs: Ethernet/InfiniBand), ``next_boot`` what the firmware
    loads at its next reset (mlxconfig, 'eth'/'ib'/'vpi', None when the NIC has no LINK_TYPE
    setting). Returns change (or None), set (mlxconfig must be run), reboot_required (the port
    runs another type than desired once firmware settings are right) and hint.
    """
    running = {"Ethernet": "eth", "InfiniBand": "ib"}.get(link_layer or "")
    plan: dict[str, Any] = {"change": None, "set": False, "reboot_required": False, "hint": None}
    if next_boot is None:
        if running != desired:
            plan["hint"] = "%s runs %s and its firmware has no LINK_TYPE setting; it cannot be made %s" % (
                ibdev,
                running or "an unknown link type",
                desired,
            )
        return plan
    if next_boot != desired:
        plan["change"] = change("rdma_link.link_type[%s]" % ibdev, next_boot, desired)
        plan["set"] = True
    if running != desired:
        plan["reboot_required"] = True
        plan["hint"] = (
            "%s runs %s; its firmware link type is %s from the next firmware reset or cold boot"
            % (ibdev, running or "an unknown link type", desired)
        )
    return plan


def link_checks(
    ibdev: str,
    netdev: str | None,
    port: dict[str, Any],
    speed_mbps: int | None,
    min_speed_gbps: int,
    diagnosis: str | None = None,
) -> list[dict[str, Any]]:
    """The link is ACTIVE/LinkUp, and (while it is, and a minimum is set) at or above the minimum speed.

    A down port gets one failed check naming it: configuration cannot bring a cable back.
    ``diagnosis`` is mlxlink's recommendation for a down port, when it could be read.
    """
    label = "%s (%s)" % (ibdev, netdev) if netdev else ibdev
    state, phys = port.get("state"), port.get("phys_state")
    down = (
        "%s link is %s (physical state %s); configuration cannot fix this: check the cable, "
        % (
            label,
            state or "unknown",
            phys or "unknown",
        )
        + "transceiver and switch port"
        + (" (mlxlink: %s)" % diagnosis if diagnosis else "")
    )
    checks = [link_state_check(ibdev, port, "%s link is up" % label, down)]
    if checks[0]["ok"] and min_speed_gbps > 0:
        speed = speed_mbps // 1000 if speed_mbps else port.get("rate_gbps")
        fast = speed is not None and speed >= min_speed_gbps
        checks.append(
            check(
                "rdma_link.speed_gbps[%s]" % ibdev,
                fast,
                speed,
                min_speed_gbps,
                "Gb/s",
                (
                    "%s runs at %s Gb/s" % (label, speed)
                    if fast
                    else "%s runs at %s Gb/s, below the required %d Gb/s (check the cable, the switch port "
                    "speed and mlxlink -d %s)" % (label, speed, min_speed_gbps, ibdev)
                ),
            )
        )
    return checks


# ------------------------------------------------------------------ boot scripts


def boot_line(argv: list[str]) -> str:
    """A command as one POSIX shell line, every word quoted as needed."""
    return " ".join(shlex.quote(word) for word in argv)


def write_line(path: str, value: str) -> str:
    """A shell line writing a value to a sysfs/configfs file."""
    return "echo %s > %s" % (shlex.quote(value), shlex.quote(path))
