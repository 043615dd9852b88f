# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysfs readers for NVIDIA (Mellanox) RDMA NICs: the kernel's own files in, plain data out.

The readers take the filesystem root (default SYSFS_ROOT, "/", read at call time so tests can
point it at a fake tree) and read the kernel's files: a file that does not exist reads as None, a
file whose content is not in the kernel's format raises rdma_parse.ParseError. The tools' output
is rdma_parse.py's.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
import re
from typing import Any

from ansible_collections.gpufleet.node.plugins.module_utils.core.parsing import quote
from ansible_collections.gpufleet.node.plugins.module_utils.rdma.rdma_parse import (
    ParseError,
    _coded,
    _rate,
    roce_mode_name,
)

# Filesystem root the sysfs readers use when not given one; tests patch it.
SYSFS_ROOT = "/"


def _path(root: str | None, *parts: str) -> str:
    return os.path.join(SYSFS_ROOT if root is None else root, "sys", *parts)


def sysfs_path(*parts: str, root: str | None = None) -> str:
    """The path of a sysfs file (``sysfs_path('class', 'net', 'eth0', 'mtu')``) under the root."""
    return _path(root, *parts)


def _read(path: str) -> str | None:
    """A sysfs file's text, or None when it does not exist or the kernel refuses the read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None
    except OSError:
        # e.g. EINVAL reading net/<if>/speed while the interface is down
        return None


def _read_int(path: str) -> int | None:
    """A sysfs number: the kernel prints decimal digits, '-' for a negative one (numa_node -1, a down
    port's speed -1); int() would also read '3_0' as 30."""
    text = _read(path)
    if text is None or text == "":
        return None
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ParseError("sysfs: %s holds %s, not a number" % (path, quote(text)))
    return int(text)


def _read_flags(directory: str) -> list[bool] | None:
    if not os.path.isdir(directory):
        return None
    flags = []
    for prio in range(8):
        value = _read_int(os.path.join(directory, str(prio)))
        if value not in (0, 1):
            raise ParseError("sysfs: %s/%d holds %r, not 0 or 1" % (directory, prio, value))
        flags.append(value == 1)
    return flags


def list_ib_devices(root: str | None = None) -> list[str]:
    """RDMA device names under /sys/class/infiniband, in the order `ls` (C locale) lists them."""
    directory = _path(root, "class", "infiniband")
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def ib_ports(ibdev: str, root: str | None = None) -> list[int]:
    directory = _path(root, "class", "infiniband", ibdev, "ports")
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def mlx5_devices() -> list[str]:
    """The RDMA devices of NVIDIA (Mellanox) mlx5 NICs, the ones gpufleet reads and sets, in device order."""
    return [name for name in list_ib_devices() if name.startswith("mlx5")]


def first_port(ibdev: str) -> int:
    """The device's port gpufleet reads and sets: its first (1 where sysfs lists none)."""
    return (ib_ports(ibdev) or [1])[0]


def read_ib_device(ibdev: str, root: str | None = None) -> dict[str, Any]:
    """fw_version, node_guid, hca_type, and the PCI device behind it (bus ID, NUMA node)."""
    base = _path(root, "class", "infiniband", ibdev)
    device = os.path.join(base, "device")
    numa = _read_int(os.path.join(device, "numa_node"))
    return {
        "fw_version": _read(os.path.join(base, "fw_ver")),
        "node_guid": _read(os.path.join(base, "node_guid")),
        "hca_type": _read(os.path.join(base, "hca_type")),
        "pci_bus_id": os.path.basename(os.path.realpath(device)) if os.path.exists(device) else None,
        "numa_node": numa if numa is not None and numa >= 0 else None,
    }


def read_ib_port(ibdev: str, port: int, root: str | None = None) -> dict[str, Any]:
    """An RDMA port's state ('4: ACTIVE'), phys_state ('5: LinkUp'), rate, link_layer, netdev.

    ``netdev`` is gid_attrs/ndevs/0, the kernel's netdev for GID 0 (what ibdev2netdev uses).
    """
    base = _path(root, "class", "infiniband", ibdev, "ports", str(port))
    port_info: dict[str, Any] = dict.fromkeys(
        ("state", "state_code", "phys_state", "phys_state_code", "rate", "rate_gbps", "width", "speed")
    )
    state = _read(os.path.join(base, "state"))
    if state is not None:
        port_info["state_code"], port_info["state"] = _coded(state, os.path.join(base, "state"))
    phys = _read(os.path.join(base, "phys_state"))
    if phys is not None:
        port_info["phys_state_code"], port_info["phys_state"] = _coded(phys, os.path.join(base, "phys_state"))
    rate = _read(os.path.join(base, "rate"))
    if rate is not None:
        port_info["rate"] = rate
        port_info.update(_rate(rate, "sysfs: " + os.path.join(base, "rate")))
    port_info["link_layer"] = _read(os.path.join(base, "link_layer"))
    port_info["netdev"] = _read(os.path.join(base, "gid_attrs", "ndevs", "0")) or None
    return port_info


def read_netdev(netdev: str, root: str | None = None) -> dict[str, Any]:
    """mtu, operstate, speed (Mb/s; None while down: the kernel prints -1 or refuses), carrier, address."""
    base = _path(root, "class", "net", netdev)
    speed = _read_int(os.path.join(base, "speed"))
    carrier = _read_int(os.path.join(base, "carrier"))
    return {
        "mtu": _read_int(os.path.join(base, "mtu")),
        "operstate": _read(os.path.join(base, "operstate")),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "carrier": None if carrier is None else carrier == 1,
        "address": _read(os.path.join(base, "address")),
    }


def read_ecn(netdev: str, root: str | None = None) -> dict[str, Any]:
    """mlx5 ECN: roce_np (notification point) and roce_rp (reaction point) per priority, CNP DSCP.

    Each list is 8 bools (priority 0..7), None when the driver has no ecn/ directory.
    """
    base = _path(root, "class", "net", netdev, "ecn")
    return {
        "np": _read_flags(os.path.join(base, "roce_np", "enable")),
        "rp": _read_flags(os.path.join(base, "roce_rp", "enable")),
        "cnp_dscp": _read_int(os.path.join(base, "roce_np", "cnp_dscp")),
    }


def _configfs_port(ibdev: str, port: int, root: str | None) -> str:
    return _path(root, "kernel", "config", "rdma_cm", ibdev, "ports", str(port))


def read_roce_mode(ibdev: str, port: int, root: str | None = None) -> str | None:
    """'v2'/'v1' from configfs rdma_cm default_roce_mode; None when that group is not created."""
    text = _read(os.path.join(_configfs_port(ibdev, port, root), "default_roce_mode"))
    return None if text is None else roce_mode_name(text)


def read_roce_tos(ibdev: str, port: int, root: str | None = None) -> int | None:
    """RDMA CM default ToS from configfs default_roce_tos; None when that group is not created."""
    return _read_int(os.path.join(_configfs_port(ibdev, port, root), "default_roce_tos"))


def read_traffic_class(ibdev: str, port: int, root: str | None = None) -> int | None:
    """MLNX_OFED tc/<port>/traffic_class: 'Global tclass=106' -> 106; None when unset or absent."""
    path = _path(root, "class", "infiniband", ibdev, "tc", str(port), "traffic_class")
    text = _read(path)
    if not text:
        return None
    match = re.match(r"^Global tclass=(\d+)", text)
    if not match:
        raise ParseError("sysfs: %s holds %r, not 'Global tclass=<n>'" % (path, text.splitlines()[0]))
    return int(match.group(1))
