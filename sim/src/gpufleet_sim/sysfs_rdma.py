"""A NIC's netdev, RDMA and rdma_cm configfs files in a node's fake sysfs, in the kernel's formats.

Written once when the node is built (the tuned baseline below) and then changed only by what
changes them on a real node: the module under test writing the files, a fault, a link event.
Formats are the kernel's: ports/N/state "4: ACTIVE", phys_state "5: LinkUp", rate
"400 Gb/sec (4X NDR)" (drivers/infiniband/core/sysfs.c), default_roce_mode "RoCE v2"
(cma_configfs.c), traffic_class "Global tclass=106" (MLNX_OFED), ECN enables "0"/"1" (mlx5 en_ecn.c).
Stdlib only: the fake tools import this inside the nodes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpufleet_sim.state import State

# The tuned fleet node (DESIGN.md): RoCE on priority 3, lossless, DSCP 26 marked as ToS 106.
ROCE_PRIORITY = 3
CNP_DSCP = 48
ROCE_TOS = 106
MTU = 4200
ROCE_V1 = "IB/RoCE v1"
ROCE_V2 = "RoCE v2"

# Ethernet speed -> the IB width/speed mlx5 reports for it (mlx5 main.c translate_eth_ext_proto_oper);
# a down port reports the driver's 4X QDR default.
_RATE = {
    100: "100 Gb/sec (4X EDR)",
    200: "200 Gb/sec (4X HDR)",
    400: "400 Gb/sec (4X NDR)",
    800: "800 Gb/sec (8X NDR)",
}
_RATE_DOWN = "40 Gb/sec (4X QDR)"
# GID table entries per port: link-local v1/v2 (no IP address in the sim), then two empty slots.
_GID_TYPES = (ROCE_V1, ROCE_V2, ROCE_V1, ROCE_V2)
_ZERO_GID = ":".join(["0000"] * 8)
# The files of ports/N/hw_counters/ on an mlx5 RoCE port (mlx5 ib counters.c: the Q counters, the
# congestion and retransmit counters, the extended ones of ConnectX-6 and later), in the order
# `rdma statistic show link` prints them; each holds one unsigned integer.
HW_COUNTERS = (
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "req_transport_retries_exceeded",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_ignored",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rx_icrc_encapsulated",
)


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n", encoding="utf-8")


def _relink(link: Path, target: Path) -> None:
    """A relative symlink, as sysfs makes them, so it resolves under the bind mount too.

    The target always ends in its own name (``../../../0000:15:00.0``, never ``../..``): tools
    take the basename of `readlink <dev>/device` as the PCI address.
    """
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.join(os.path.relpath(target.parent, link.parent), target.name))


def netdev_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return sys_root / "class" / "net" / str(nic["netdev"])


def ibdev_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return sys_root / "class" / "infiniband" / str(nic["ibdev"])


def configfs_port_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return sys_root / "kernel" / "config" / "rdma_cm" / str(nic["ibdev"]) / "ports" / str(nic["port"])


def rate_text(nic: dict[str, Any]) -> str:
    if not nic["link_up"]:
        return _RATE_DOWN
    return _RATE.get(int(nic["speed_gbps"]), _RATE[400])


def link_gid(mac: str) -> str:
    """fe80::/64 GID with the EUI-64 of the port MAC (as the kernel fills GID 0)."""
    octets = [int(part, 16) for part in mac.split(":")]
    eui = [octets[0] ^ 0x02, *octets[1:3], 0xFF, 0xFE, *octets[3:6]]
    groups = [f"{eui[i]:02x}{eui[i + 1]:02x}" for i in range(0, 8, 2)]
    return ":".join(["fe80", "0000", "0000", "0000", *groups])


def _flags(enabled: list[int]) -> list[int]:
    return [1 if prio in enabled else 0 for prio in range(8)]


def write_ecn(sys_root: Path, nic: dict[str, Any], np: list[int], rp: list[int]) -> None:
    """ECN notification/reaction point enables, 8 values (0/1) for priorities 0..7."""
    base = netdev_dir(sys_root, nic) / "ecn"
    for prio in range(8):
        _write(base / "roce_np" / "enable" / str(prio), np[prio])
        _write(base / "roce_rp" / "enable" / str(prio), rp[prio])


def write_roce_mode(sys_root: Path, nic: dict[str, Any], mode: str) -> None:
    _write(configfs_port_dir(sys_root, nic) / "default_roce_mode", mode)


# The physical-layer PortCounters of ports/N/counters/ (IBTA PortCounters; mlx5 fills them from the
# port's PPCNT register) that gpufleet judges; each holds one unsigned integer.
PORT_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


def port_counters_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return _port_dir(sys_root, nic) / "counters"


def hw_counters_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return _port_dir(sys_root, nic) / "hw_counters"


def write_counters(base: Path, values: dict[str, int]) -> None:
    """A port's counter files in ``base`` (port_counters_dir or hw_counters_dir; sim/roce_traffic.py
    keeps the values): one integer each."""
    for name, value in values.items():
        _write(base / name, value)


def _port_dir(sys_root: Path, nic: dict[str, Any]) -> Path:
    return ibdev_dir(sys_root, nic) / "ports" / str(nic["port"])


def _render_netdev(nic: dict[str, Any], net: Path) -> None:
    files: dict[str, object] = {
        "address": nic["mac"],
        "addr_len": 6,
        "dev_id": "0x0",  # its presence tells ibdev2netdev to use the new-style lookup
        "dev_port": 0,
        "type": 1,
        "mtu": MTU,
    }
    for name, value in files.items():
        _write(net / name, value)
    _write(net / "ecn" / "roce_np" / "cnp_dscp", CNP_DSCP)


def _render_ibdev(nic: dict[str, Any], ib: Path) -> None:
    files: dict[str, object] = {
        "node_guid": nic["node_guid"],
        "sys_image_guid": nic["node_guid"],
        "fw_ver": nic["fw_version"],
        "hca_type": f"MT{int(nic['pci_device_id'], 16)}",
        "board_id": nic["psid"],
        "node_type": "1: CA",
    }
    for name, value in files.items():
        _write(ib / name, value)
    port = ib / "ports" / str(nic["port"])
    _write(port / "link_layer", "Ethernet" if nic["link_type"] == "eth" else "InfiniBand")
    _write(port / "lid", "0x0")
    _write(port / "sm_lid", "0x0")
    _write(port / "cap_mask", "0x00010000")
    gid = link_gid(nic["mac"])
    for index, gid_type in enumerate(_GID_TYPES):
        _write(port / "gids" / str(index), gid if index < 2 else _ZERO_GID)
        _write(port / "gid_attrs" / "types" / str(index), gid_type)
        if index < 2:
            _write(port / "gid_attrs" / "ndevs" / str(index), nic["netdev"])
    _write(ib / "tc" / str(nic["port"]) / "traffic_class", f"Global tclass={ROCE_TOS}")
    # Every counter starts at zero with the NIC (sim/roce_traffic.py moves them when read).
    for name in HW_COUNTERS:
        _write(port / "hw_counters" / name, 0)
    for name in PORT_COUNTERS:
        _write(port / "counters" / name, 0)


def render_nic(state: State, nic: dict[str, Any], pci_dev_dir: Path, sys_root: Path) -> None:
    """Writes the NIC's sysfs under its PCI device directory and the class/ and configfs entries."""
    net = pci_dev_dir / "net" / str(nic["netdev"])
    ib = pci_dev_dir / "infiniband" / str(nic["ibdev"])
    _render_netdev(nic, net)
    _render_ibdev(nic, ib)
    # <dev>/device -> ../../../<bdf>: how tools find the PCI function (bus ID, NUMA node).
    _relink(net / "device", pci_dev_dir)
    _relink(ib / "device", pci_dev_dir)
    _relink(netdev_dir(sys_root, nic), net)
    _relink(ibdev_dir(sys_root, nic), ib)
    write_ecn(sys_root, nic, _flags([ROCE_PRIORITY]), _flags([ROCE_PRIORITY]))
    write_roce_mode(sys_root, nic, ROCE_V2)
    _write(configfs_port_dir(sys_root, nic) / "default_roce_tos", ROCE_TOS)
    set_link(state, nic, sys_root, bool(nic["link_up"]))


def set_link(state: State, nic: dict[str, Any], sys_root: Path, up: bool) -> None:
    """Link up or down (a pulled cable, a switch port down): state and every file that shows it.

    A link that goes down counts it where Linux and mlx5 do: the netdev's ``carrier_down_count``
    (and ``carrier_up_count`` when it comes back) and ethtool's ``link_down_events_phy``.
    """
    was_up = bool(nic.get("link_up", True))
    nic["link_up"] = up
    if was_up and not up:
        nic["carrier_down_count"] = int(nic.get("carrier_down_count", 0)) + 1
        record = nic.setdefault("roce_counters", {"values": {}})
        values = record.setdefault("values", {})
        values["link_down_events_phy"] = values.get("link_down_events_phy", 0) + 1
    elif up and not was_up:
        nic["carrier_up_count"] = int(nic.get("carrier_up_count", 0)) + 1
    net = netdev_dir(sys_root, nic)
    port = _port_dir(sys_root, nic)
    _write(net / "carrier_down_count", int(nic.get("carrier_down_count", 0)))
    _write(net / "carrier_up_count", int(nic.get("carrier_up_count", 0)))
    _write(net / "operstate", "up" if up else "down")
    _write(net / "carrier", 1 if up else 0)
    # Mb/s; an interface that is up without carrier reports SPEED_UNKNOWN as -1.
    _write(net / "speed", int(nic["speed_gbps"]) * 1000 if up else -1)
    _write(port / "state", "4: ACTIVE" if up else "1: DOWN")
    # mlx5 RoCE ports report LinkUp when active and Disabled otherwise (mlx5_query_port_roce).
    _write(port / "phys_state", "5: LinkUp" if up else "3: Disabled")
    _write(port / "rate", rate_text(nic))


def find_nic(state: State, name: str) -> dict[str, Any] | None:
    """The NIC a tool argument names: RDMA device (mlx5_0), netdev, or PCI BDF with or without domain."""
    wanted = name.lower()
    for nic in state["nics"]:
        bdf = str(nic["pci_bus_id"]).lower()
        if wanted in (str(nic["ibdev"]).lower(), str(nic["netdev"]).lower(), bdf, bdf.split(":", 1)[1]):
            nic_found: dict[str, Any] = nic
            return nic_found
    return None
