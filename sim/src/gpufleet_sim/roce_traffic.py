"""RoCE traffic on a simulated node's ports: the counters ``ethtool -S`` and sysfs ``hw_counters`` show.

Each NIC keeps its counters in the node state (``nic["roce_counters"] = {"t": <time>, "values":
{name: float}}``) and they are advanced lazily, when read (:func:`read`), from the time of the last
read to now. How fast each counter grows is :func:`rates`: proportional to the node's GPU load and
shaped by the condition of the port's path (:func:`path_of`):

- the load: the mean utilisation of the node's GPUs in the thermal model (``thermal.utilization``),
  as it is at the read, counted for the whole time since the previous read. A reading under a
  steady load (the burn-in's end) sees that load's rates; one at idle (the burn-in's start) sees
  next to nothing. A port whose link is down moves nothing.
- the switch side, from the neighbour leaf's NVUE state (``<fleet root>/leaves/<leaf>.json``,
  ``nvue_state.view(..., "operational")``), judged here by four small functions rather than by
  gpufleet's own code (the simulator never imports plugins/): PFC on the host's RoCE priority
  (:func:`switch_pfc`), the switch priority DSCP 26 lands in (:func:`switch_priority`), ECN on the
  traffic class that priority queues in (:func:`switch_ecn`), the port's MTU (:func:`switch_mtu`).
  No leaf file (a fleet without leaves, a test) is a healthy switch.
- the host side, from the node: PFC on priority 3 (``nic["pfc"]``, what mlnx_qos sets), the ECN
  notification and reaction points (sysfs ``ecn/roce_np|roce_rp/enable/3``), the netdev MTU.

What each condition does (issue 12 §3), per second at full load on one port:

- healthy: ECN marks, CNPs sent and handled (a few hundred: congestion control at work), PFC pauses
  received and sent for 2 % and 1 % of the time, no drop, no retransmit;
- RoCE not lossless end to end (switch PFC off on priority 3, DSCP 26 mapped to another priority,
  or host PFC off): the switch does not pause the RoCE traffic toward the host, so the host's
  buffers overrun (``rx_discards_phy``) and lost packets are retransmitted (``out_of_sequence``,
  ``packet_seq_err``, ``implied_nak_seq_err``, ``local_ack_timeout_err``, ``roce_adp_retrans``...);
  no PFC pause is received on priority 3;
- ECN off on the RoCE class with PFC on: nothing marks, so no CNP and no rate reduction; the
  senders run until the switch pauses them, 35 % (received) and 25 % (sent) of the time;
- switch MTU below the host's: frames above it are dropped at the switch, the senders time out
  (``local_ack_timeout_err``, ``roce_adp_retrans_to``) and queue pairs run out of retries
  (``req_transport_retries_exceeded``).

``ethtool -S`` prints mlx5's names in mlx5's order (``rx_prioN_pause*`` only for priorities with
PFC on, the global pause counters only with global pause on), as ``sim/tools/ethtool.py`` shows
them; the RDMA counters are the files of ``/sys/class/infiniband/<dev>/ports/1/hw_counters/``
(sysfs_rdma.HW_COUNTERS), written on each read so that both show one reading.

Stdlib only: the fake tools run this inside the nodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet_sim import link_flap, nvue_state, sysfs_rdma, thermal
from gpufleet_sim.state import State, locked, present_gpus

Tree = dict[str, Any]

ROCE_PRIORITY = sysfs_rdma.ROCE_PRIORITY
ROCE_DSCP = 26
# Cumulus's default when a leaf's tree names no MTU for the port ([TREE] shows 9216).
SWITCH_DEFAULT_MTU = nvue_state.DEFAULT_MTU

# Share of the line rate a port carries under the burn-in's full load (each way), and the size of
# a RoCE v2 frame at the 4096-byte RDMA MTU (payload, BTH, UDP, IP, Ethernet, ICRC, FCS).
LOAD_SHARE = 0.4
FRAME_BYTES = 4160

# ethtool -S counters of the physical port and the RDMA vport, in mlx5's order (en_stats.c groups:
# sw, q counters, vport, 802.3, per priority, PFC, global pause, PFC stall, module).
_SW = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_out_of_buffer")
_VPORT = (
    "rx_vport_unicast_packets",
    "rx_vport_unicast_bytes",
    "tx_vport_unicast_packets",
    "tx_vport_unicast_bytes",
    "rx_vport_rdma_unicast_packets",
    "rx_vport_rdma_unicast_bytes",
    "tx_vport_rdma_unicast_packets",
    "tx_vport_rdma_unicast_bytes",
)
_PHY = (
    "tx_packets_phy",
    "rx_packets_phy",
    "rx_crc_errors_phy",
    "tx_bytes_phy",
    "rx_bytes_phy",
    "tx_multicast_phy",
    "tx_broadcast_phy",
    "rx_multicast_phy",
    "rx_broadcast_phy",
    "rx_in_range_len_errors_phy",
    "rx_out_of_range_len_phy",
    "rx_oversize_pkts_phy",
    "rx_symbol_err_phy",
    "tx_mac_control_phy",
    "rx_mac_control_phy",
    "rx_unsupported_op_phy",
    "rx_pause_ctrl_phy",
    "tx_pause_ctrl_phy",
    "rx_discards_phy",
    "tx_discards_phy",
    "tx_errors_phy",
    "rx_undersize_pkts_phy",
    "rx_fragments_phy",
    "rx_jabbers_phy",
    "link_down_events_phy",
)
_PER_PRIO = ("rx_prio%d_bytes", "rx_prio%d_packets", "tx_prio%d_bytes", "tx_prio%d_packets")
# Printed only for a priority with PFC on (mlx5e_query_pfc_combined).
_PFC = (
    "rx_prio%d_pause",
    "rx_prio%d_pause_duration",
    "tx_prio%d_pause",
    "tx_prio%d_pause_duration",
    "rx_prio%d_pause_transition",
)
# Printed only with global (802.3x) pause on.
_GLOBAL_PAUSE = (
    "rx_global_pause",
    "rx_global_pause_duration",
    "tx_global_pause",
    "tx_global_pause_duration",
    "rx_global_pause_transition",
)
# PFC storm prevention (ConnectX-5 and later have the stall detection these need).
_STALL = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
_MODULE = ("module_unplug", "module_bus_stuck", "module_high_temp", "module_bad_shorted")

# Per second at full load, by what happens on the path (see the module docstring).
_CONGESTION = {
    # received ECN-marked packets (NP), CNPs sent for them, CNPs from the peers acted on (RP)
    "np_ecn_marked_roce_packets": 400.0,
    "np_cnp_sent": 300.0,
    "rp_cnp_handled": 300.0,
}
_HEALTHY_PAUSE = {"rx": (200.0, 0.02), "tx": (100.0, 0.01)}  # (pause frames, share of time paused)
_ECN_OFF_PAUSE = {"rx": (3000.0, 0.35), "tx": (2000.0, 0.25)}
_LOSSY = {
    "rx_discards_phy": 1000.0,
    "out_of_sequence": 800.0,
    "packet_seq_err": 200.0,
    "implied_nak_seq_err": 50.0,
    "local_ack_timeout_err": 20.0,
    "duplicate_request": 100.0,
    "roce_adp_retrans": 300.0,
    "roce_adp_retrans_to": 20.0,
}
_MTU_DROPS = {
    "local_ack_timeout_err": 50.0,
    "roce_adp_retrans": 50.0,
    "roce_adp_retrans_to": 50.0,
    # a queue pair whose every large frame is dropped gives up after its retries
    "req_transport_retries_exceeded": 0.5,
}


# ---------------------------------------------------------------- the switch side


def _node(tree: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def switch_priority(qos: Tree, dscp: int = ROCE_DSCP) -> int:
    """The switch priority DSCP ``dscp`` is mapped to (Cumulus's default: DSCP // 8)."""
    value = _node(qos, "mapping", "default-global", "dscp", str(dscp), "switch-priority")
    return int(value) if isinstance(value, int) else dscp // 8


def switch_pfc(qos: Tree, priority: int = ROCE_PRIORITY) -> bool:
    """PFC on ``priority``, received and sent."""
    pfc = _node(qos, "pfc", "default-global")
    if not isinstance(pfc, dict):
        return False
    members = pfc.get("switch-priority")
    return (
        isinstance(members, dict)
        and str(priority) in members
        and pfc.get("rx", "enable") == "enable"
        and pfc.get("tx", "enable") == "enable"
    )


def switch_ecn(qos: Tree, priority: int) -> bool:
    """ECN marking on the traffic class switch priority ``priority`` queues in."""
    tc = _node(
        qos, "egress-queue-mapping", "default-global", "switch-priority", str(priority), "traffic-class"
    )
    tc = tc if isinstance(tc, int) else priority
    ecn = _node(qos, "congestion-control", "default-global", "traffic-class", str(tc), "ecn")
    return bool(ecn == "enable")


def switch_mtu(tree: Tree, port: str) -> int:
    value = _node(tree, "interface", port, "link", "mtu")
    return int(value) if isinstance(value, int) else SWITCH_DEFAULT_MTU


# ---------------------------------------------------------------- one port's path


@dataclass(frozen=True)
class PortPath:
    """What one RoCE port's traffic meets: True is healthy."""

    up: bool = True
    host_pfc: bool = True  # the NIC runs PFC on priority 3
    host_np: bool = True  # the NIC sends CNPs for marked packets (ECN notification point)
    host_rp: bool = True  # the NIC slows down on CNPs (ECN reaction point)
    switch_pfc: bool = True  # the leaf runs PFC on priority 3
    switch_map: bool = True  # the leaf puts DSCP 26 in priority 3
    switch_ecn: bool = True  # the leaf marks the class the RoCE traffic queues in
    mtu: bool = True  # the leaf's port MTU is at least the host's

    @property
    def lossless(self) -> bool:
        return self.host_pfc and self.switch_pfc and self.switch_map


def leaf_file(node_dir: Path, leaf: str) -> Path:
    """Where a leaf's NVUE state lives: ``<fleet root>/leaves/<leaf>.json`` (node dirs are
    ``<fleet root>/nodes/<node>``)."""
    return node_dir.parent.parent / "leaves" / f"{leaf}.json"


def _flag(path: Path) -> bool | None:
    try:
        return path.read_text(encoding="utf-8").strip() == "1"
    except OSError:
        return None


def _host_mtu(sys_root: Path, nic: dict[str, Any]) -> int:
    try:
        return int((sysfs_rdma.netdev_dir(sys_root, nic) / "mtu").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return sysfs_rdma.MTU


def path_of(node_dir: Path, nic: dict[str, Any]) -> PortPath:
    """The condition of ``nic``'s path: its own settings and its neighbour leaf's."""
    sys_root = node_dir / "sys"
    ecn = sysfs_rdma.netdev_dir(sys_root, nic) / "ecn"
    prio = str(ROCE_PRIORITY)
    pfc = nic.get("pfc") or []
    host = {
        "up": bool(nic.get("link_up", True)),
        "host_pfc": len(pfc) > ROCE_PRIORITY and bool(pfc[ROCE_PRIORITY]),
        "host_np": _flag(ecn / "roce_np" / "enable" / prio) is not False,
        "host_rp": _flag(ecn / "roce_rp" / "enable" / prio) is not False,
    }
    neighbor = nic.get("neighbor") or {}
    leaf, port = neighbor.get("chassis"), neighbor.get("port")
    path = leaf_file(node_dir, str(leaf)) if leaf and port else None
    if path is None or not path.is_file():
        return PortPath(**host)
    tree = nvue_state.view(nvue_state.load(path), "operational") or {}
    qos = tree.get("qos") or {}
    priority = switch_priority(qos)
    return PortPath(
        **host,
        switch_pfc=switch_pfc(qos),
        switch_map=priority == ROCE_PRIORITY,
        switch_ecn=switch_ecn(qos, priority),
        mtu=switch_mtu(tree, str(port)) >= _host_mtu(sys_root, nic),
    )


# ---------------------------------------------------------------- rates


def load_fraction(state: State, now: float) -> float:
    """Mean utilisation of the node's GPUs at ``now``, 0..1."""
    gpus = present_gpus(state)
    if not gpus:
        return 0.0
    return sum(thermal.utilization(gpu, now) for gpu in gpus) / len(gpus) / 100.0


def rates(nic: dict[str, Any], path: PortPath, load: float) -> dict[str, float]:
    """Per second, how much each counter grows at ``load`` (0..1) on this path."""
    if not path.up or load <= 0:
        return {}
    bytes_s = float(nic.get("speed_gbps", 400)) * 1e9 / 8 * LOAD_SHARE * load
    packets_s = bytes_s / FRAME_BYTES
    grow: dict[str, float] = {}
    for way in ("rx", "tx"):
        for name in (
            f"{way}_bytes_phy",
            f"{way}_vport_rdma_unicast_bytes",
            f"{way}_prio{ROCE_PRIORITY}_bytes",
        ):
            grow[name] = bytes_s
        for name in (
            f"{way}_packets_phy",
            f"{way}_vport_rdma_unicast_packets",
            f"{way}_prio{ROCE_PRIORITY}_packets",
        ):
            grow[name] = packets_s
    grow["rx_write_requests"] = packets_s / 16
    grow["rx_read_requests"] = packets_s / 64

    if path.switch_ecn:
        marked = _CONGESTION["np_ecn_marked_roce_packets"] * load
        grow["np_ecn_marked_roce_packets"] = marked
        if path.host_np:
            grow["np_cnp_sent"] = _CONGESTION["np_cnp_sent"] * load
        handled = _CONGESTION["rp_cnp_handled"] * load
        grow["rp_cnp_handled" if path.host_rp else "rp_cnp_ignored"] = handled

    pauses = _HEALTHY_PAUSE if path.switch_ecn else _ECN_OFF_PAUSE
    for way, (frames, share) in pauses.items():
        # the switch pauses the RoCE priority toward the host only when it runs PFC on it and the
        # RoCE traffic is in it; the host pauses the switch whenever it runs PFC itself
        if way == "rx" and not path.lossless:
            continue
        if way == "tx" and not path.host_pfc:
            continue
        grow[f"{way}_prio{ROCE_PRIORITY}_pause"] = frames * load
        grow[f"{way}_prio{ROCE_PRIORITY}_pause_duration"] = share * 1e6 * load
        if way == "rx":
            grow[f"rx_prio{ROCE_PRIORITY}_pause_transition"] = frames * load / 2

    if not path.lossless:
        for name, per_s in _LOSSY.items():
            grow[name] = grow.get(name, 0.0) + per_s * load
    if not path.mtu:
        for name, per_s in _MTU_DROPS.items():
            grow[name] = grow.get(name, 0.0) + per_s * load
    return grow


# ---------------------------------------------------------------- reading


# The physical layer's symbol errors of a port with the nic-symbol-errors fault (``nic["phy_errors"] =
# {"per_s": n}``): counted by mlx5's ethtool -S and by the port's sysfs counters/symbol_error, at the
# same rate at idle and under load (a link carries idle symbols too), while the link is up.
SYMBOL_ERROR_COUNTERS = ("rx_symbol_err_phy", "symbol_error")


def phy_error_rates(nic: dict[str, Any]) -> dict[str, float]:
    """Per second, how much each physical-layer error counter grows on ``nic`` (empty when healthy)."""
    fault = nic.get("phy_errors") or {}
    if not fault or not nic.get("link_up", True):
        return {}
    return {name: float(fault.get("per_s", 0.0)) for name in SYMBOL_ERROR_COUNTERS}


def _values(nic: dict[str, Any]) -> dict[str, float]:
    record = nic.get("roce_counters") or {}
    values: dict[str, float] = dict(record.get("values") or {})
    return values


def advance(node_dir: Path, state: State, nic: dict[str, Any], now: float) -> dict[str, float]:
    """Moves ``nic``'s counters to ``now`` (in ``state``; the caller saves it) and returns them.

    The first read starts every counter at zero (as the NIC did at boot: sysfs shows zeros
    from the build on).
    """
    record = nic.get("roce_counters")
    values = _values(nic)
    if record is not None:
        elapsed = max(now - float(record.get("t", now)), 0.0)
        if elapsed > 0:
            for name, per_s in rates(nic, path_of(node_dir, nic), load_fraction(state, now)).items():
                values[name] = values.get(name, 0.0) + per_s * elapsed
            for name, per_s in phy_error_rates(nic).items():
                values[name] = values.get(name, 0.0) + per_s * elapsed
    nic["roce_counters"] = {"t": now, "values": values}
    return values


def _count(values: Mapping[str, float], name: str) -> int:
    return math.floor(values.get(name, 0.0))


def ethtool_stats(nic: dict[str, Any], values: Mapping[str, float]) -> list[tuple[str, int]]:
    """``ethtool -S`` of the NIC's netdev: ``[(name, value)]`` in mlx5's order."""
    names = [*_SW, *_VPORT, *_PHY]
    for prio in range(8):
        names.extend(pattern % prio for pattern in _PER_PRIO)
    pfc = nic.get("pfc") or []
    for prio in range(8):
        if len(pfc) > prio and pfc[prio]:
            names.extend(pattern % prio for pattern in _PFC)
    pause = nic.get("pause") or {}
    if pause.get("rx") or pause.get("tx"):
        names.extend(_GLOBAL_PAUSE)
    names.extend((*_STALL, *_MODULE))
    return [(name, _count(values, name)) for name in names]


def render_ethtool(nic: dict[str, Any], values: Mapping[str, float]) -> str:
    """The text ``ethtool -S`` prints: "NIC statistics:" then "     <name>: <value>" lines."""
    lines = ["NIC statistics:"]
    lines.extend(f"     {name}: {value}" for name, value in ethtool_stats(nic, values))
    return "\n".join(lines) + "\n"


def hw_counters(values: Mapping[str, float]) -> dict[str, int]:
    """The port's sysfs hw_counters files: every name of sysfs_rdma.HW_COUNTERS."""
    return {name: _count(values, name) for name in sysfs_rdma.HW_COUNTERS}


def port_counters(values: Mapping[str, float]) -> dict[str, int]:
    """The port's sysfs counters/ files: every name of sysfs_rdma.PORT_COUNTERS."""
    return {name: _count(values, name) for name in sysfs_rdma.PORT_COUNTERS}


def read(node_dir: Path, netdev: str, now: float) -> str | None:
    """``ethtool -S <netdev>`` at ``now``: advances that NIC's counters (and a flapping port's flaps,
    sim/link_flap.py), writes its hw_counters and carrier count files, returns the text (None when no
    NIC has that netdev)."""
    with locked(node_dir) as state:
        nic = next((n for n in state["nics"] if n["netdev"] == netdev), None)
        if nic is None:
            return None
        # a flapping port's flaps since the last read: link_down_events_phy and the carrier counts
        link_flap.advance(state, node_dir / "sys", nic, now)
        values = advance(node_dir, state, nic, now)
        sys_root = node_dir / "sys"
        sysfs_rdma.write_counters(sysfs_rdma.hw_counters_dir(sys_root, nic), hw_counters(values))
        sysfs_rdma.write_counters(sysfs_rdma.port_counters_dir(sys_root, nic), port_counters(values))
        return render_ethtool(nic, values)
