"""Builds a node's initial state from a hardware profile (controller side)."""

from __future__ import annotations

import time
import uuid
from importlib import resources
from typing import Any

import yaml

from gpufleet_sim import gpudirect, kernel_log, thermal
from gpufleet_sim.state import State, sysfs_bdf

PROFILES = ("b300-16", "h100-8", "h200")
# Each profile's liquid-cooling loop (simulated: no public capture shows these). Flow is sized at
# ~1.6 L/min per kW of full node heat (25 kW on b300-16, per DESIGN.md; 7 kW on h100-8), so the
# loop's ΔT stays under ~10 K at full load; 25 C is a warm-water (ASHRAE W27) secondary supply;
# base_load_w is the non-GPU heat on the same plates (NVSwitches, NICs, VRs); a healthy loop
# delivers 96 % of its rated flow.
COOLING: dict[str, dict[str, float]] = {
    "b300-16": {"supply_c": 25.0, "rated_flow_lpm": 40.0, "base_load_w": 2600.0},
    "h100-8": {"supply_c": 25.0, "rated_flow_lpm": 12.0, "base_load_w": 1400.0},
    # h200: supply chosen so an idle die reads the real trace's 36 C and a capped one its ~61 C.
    "h200": {"supply_c": 31.9, "rated_flow_lpm": 12.0, "base_load_w": 1400.0},
}
# The profile's gpu.thermal keys the thermal model reads from the node's cooling (defaults there).
THERMAL_KEYS = ("die_tau_s", "memory_tau_s", "memory_rise_ratio")
HEALTHY_FLOW_SHARE = 0.96
# What the stand-in vLLM serves: the reference deployment's steady prefix-cache hit rate, and
# how long it takes to load (seconds; a real one takes minutes).
SERVING = {"prefix_cache_hit_rate": 0.9, "startup_s": 2.0}
_NAMESPACE = uuid.UUID("6f1c7a52-3c1e-4d0b-9d6e-2f4b8a1e0c11")


def load_profile(name: str) -> dict[str, Any]:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}")
    text = resources.files("gpufleet_sim").joinpath("profiles", f"{name}.yml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _gpu_uuid(node: str, slot: int) -> str:
    return "GPU-" + str(uuid.uuid5(_NAMESPACE, f"{node}/gpu/{slot}"))


def _hex_serial(node: str, slot: int, digits: int) -> str:
    return str(int(uuid.uuid5(_NAMESPACE, f"{node}/serial/{slot}").hex[:12], 16))[:digits]


def _switch_base_bus(switch: int, switches: int) -> int:
    # Half the switches hang off each socket, as on HGX boards.
    half = max(switches // 2, 1)
    socket, pos = divmod(switch, half)
    return (0x10 if socket == 0 else 0x90) + 0x11 * pos


def build_node_state(node: str, profile_name: str, index: int) -> State:
    """The node as the profile describes it, configured as a tuned fleet node is."""
    profile = load_profile(profile_name)
    switches = int(profile["switches"])
    numa_count = len(profile["numa_nodes"])
    domains = int(profile["nvlink_domains"])
    gpu_p, nic_p = profile["gpu"], profile["nic"]
    state: State = {
        "name": node,
        "index": index,
        "profile": profile_name,
        "driver_version": profile["driver_version"],
        "cuda_version": profile["cuda_version"],
        "cpu": profile["cpu"],
        "numa_nodes": profile["numa_nodes"],
        "pci_switches": [],
        "gpus": [],
        "nics": [],
        "faults": [],
        # systemd's view; the driver's persistence daemon is enabled as on a tuned node
        "units": {
            "nvidia-persistenced.service": {"enabled": True, "active": False},
            # nvidia-fabricmanager and nvidia-dcgm, running (sim/gpudirect.py)
            **gpudirect.initial_units(),
        },
    }
    slot = nic_slot = 0
    for sw in range(switches):
        base = _switch_base_bus(sw, switches)
        numa = min(sw * numa_count // switches, numa_count - 1)
        children: list[str] = []
        for _ in range(int(profile["gpus_per_switch"])):
            bus = base + 3 + len(children)
            bdf = f"00000000:{bus:02X}:00.0"
            children.append(bdf)
            power = gpu_p["power"]
            temp = gpu_p["temperature"]
            state["gpus"].append(
                {
                    "slot": slot,
                    "uuid": _gpu_uuid(node, slot),
                    "serial": "1" + _hex_serial(node, slot, 12),
                    "name": gpu_p["name"],
                    "pci_bus_id": bdf,
                    "pci_device_id": gpu_p["pci_device_id"],
                    "pci_subsystem_id": gpu_p["pci_subsystem_id"],
                    "board_part_number": gpu_p["board_part_number"],
                    "vbios_version": gpu_p["vbios_version"],
                    "module_id": slot % 8 + 1,
                    "nvlink_domain": min(sw * domains // switches, domains - 1),
                    "numa_node": numa,
                    "switch": sw,
                    "present": True,
                    "persistence_mode": True,
                    "memory_total_mib": gpu_p["memory_total_mib"],
                    "memory_used_mib": 0,
                    "sm_count": gpu_p["sm_count"],
                    "compute_cap": gpu_p["compute_cap"],
                    "nvlink_count": gpu_p["nvlink_count"],
                    "nvlink_speed_gbps": gpu_p["nvlink_speed_gbps"],
                    # every link active, no error counted (sim/tools/nvsmi_nvlink.py)
                    "nvlink": {"inactive": [], "errors": {}},
                    "pcie": dict(gpu_p["pcie"]),
                    "utilization_pct": 0,
                    "power": {
                        "default_limit_w": power["default_limit_w"],
                        "min_limit_w": power["min_limit_w"],
                        "max_limit_w": power["max_limit_w"],
                        "requested_limit_w": power["default_limit_w"],
                        "enforced_limit_w": power["default_limit_w"],
                        "draw_w": power["idle_draw_w"],
                    },
                    "temperature": {
                        "gpu_c": temp["idle_gpu_c"],
                        "memory_c": temp["idle_memory_c"],
                        "slowdown_c": temp["slowdown_c"],
                        "shutdown_c": temp["shutdown_c"],
                        "max_operating_c": temp["max_operating_c"],
                    },
                    "clocks": dict(gpu_p["clocks"]),
                    "clocks_event_reasons": ["gpu_idle"],
                    "ecc": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
                    "remapped_rows": {
                        "correctable": 0,
                        "uncorrectable": 0,
                        "pending": False,
                        "failure": False,
                    },
                }
            )
            slot += 1
        for _ in range(int(profile["nics_per_switch"])):
            bus = base + 3 + len(children)
            bdf = f"0000:{bus:02x}:00.0"
            children.append(bdf)
            guid = uuid.uuid5(_NAMESPACE, f"{node}/nic/{nic_slot}").hex[:16]
            state["nics"].append(
                {
                    "slot": nic_slot,
                    "ibdev": f"mlx5_{nic_slot}",
                    "netdev": f"{nic_p['netdev_prefix']}{bus}np0",
                    "pci_bus_id": bdf,
                    "pci_device_id": nic_p["pci_device_id"],
                    "model": nic_p["model"],
                    "part_number": nic_p["part_number"],
                    "psid": nic_p["psid"],
                    "fw_version": nic_p["fw_version"],
                    "numa_node": numa,
                    "switch": sw,
                    "port": 1,
                    "node_guid": ":".join(guid[i : i + 4] for i in range(0, 16, 4)),
                    "mac": "b8:3f:d2:" + ":".join(guid[i : i + 2] for i in range(10, 16, 2)),
                    "link_type": "eth",
                    "link_up": True,
                    "speed_gbps": nic_p["speed_gbps"],
                    "supported_speeds_gbps": list(nic_p["supported_speeds_gbps"]),
                    "trust": "dscp",
                    "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
                    "pending_link_type": None,
                }
            )
            nic_slot += 1
        state["pci_switches"].append(
            {
                "index": sw,
                "root_port": f"0000:{base:02x}:01.0",
                "upstream": f"0000:{base + 1:02x}:00.0",
                "downstream_bus": base + 2,
                "children": [c if len(c) == 12 else sysfs_bdf(c) for c in children],
                "numa_node": numa,
                "vendor": "0x1000",
                "device": "0xc030",
            }
        )
    _cooling(state, profile)
    _cabling(state, index)
    kernel_log.boot(state, time.time())
    return state


# The simulated fabric: a pair of leaves per 16 nodes (one leaf per NVLink baseboard's half of the
# RoCE ports), each a Cumulus Linux switch of 64 ports. Their identities are what lldpd on the node
# hears (sim/tools/lldpctl.py); their NVUE state is sim/nvue_state.py's.
NODES_PER_LEAF_PAIR = 16
LEAF_PORTS = 64


def leaf_name(number: int) -> str:
    return f"leaf{number:02d}"


def leaf_count(nodes: int) -> int:
    """How many leaves a fleet of ``nodes`` is cabled to (two per 16 nodes)."""
    return 2 * -(-nodes // NODES_PER_LEAF_PAIR)


def leaf_identity(leaf: str) -> dict[str, str]:
    """A leaf's LLDP chassis: name, MAC, management address and description."""
    number = int(leaf.removeprefix("leaf"))
    return {
        "chassis": leaf,
        "chassis_mac": f"1c:34:da:00:00:{number:02x}",
        "mgmt_ip": f"192.0.2.{number}",
        "descr": "Cumulus Linux version 5.12.0 running on NVIDIA SN5600",
    }


def _cabling(state: State, index: int) -> None:
    """Each NIC's neighbour as a cabling plan would have it: node N is on leaf pair (N-1)//16, the
    first half of its RoCE ports on the pair's first leaf, the rest on the second, the k-th port of
    a half on swp(((N-1) % 16) * half + k + 1)."""
    nics = state["nics"]
    half = max(len(nics) // 2, 1)
    pair = (max(index, 1) - 1) // NODES_PER_LEAF_PAIR
    for position, nic in enumerate(nics):
        leaf = leaf_name(2 * pair + 1 + min(position // half, 1))
        swp = f"swp{((index - 1) % NODES_PER_LEAF_PAIR) * half + position % half + 1}"
        nic["neighbor"] = {**leaf_identity(leaf), "port": swp, "port_descr": swp}


def _cooling(state: State, profile: dict[str, Any]) -> None:
    """The node's loop, calibrated so that an idle GPU on it reads the profile's idle temperature."""
    loop = COOLING[str(profile["name"])]
    flow = round(loop["rated_flow_lpm"] * HEALTHY_FLOW_SHARE, 1)
    state["cooling"] = {
        "supply_c": loop["supply_c"],
        "design_supply_c": loop["supply_c"],
        "flow_lpm": flow,
        "nominal_flow_lpm": flow,
        "rated_flow_lpm": loop["rated_flow_lpm"],
        "base_load_w": loop["base_load_w"],
        "gpu_idle_w": float(profile["gpu"]["power"]["idle_draw_w"]),
        "leak_detected": False,
    }
    fitted = profile["gpu"].get("thermal") or {}
    state["cooling"].update({key: float(fitted[key]) for key in THERMAL_KEYS if key in fitted})
    if "full_load_w" in profile["gpu"]["power"]:
        state["cooling"]["gpu_full_load_w"] = float(profile["gpu"]["power"]["full_load_w"])
    util_tau = float(fitted.get("util_tau_s", thermal.UTIL_TAU_S))
    thermal.calibrate(state, float(profile["gpu"]["temperature"]["idle_gpu_c"]), time.time(), util_tau)
    state["serving"] = dict(SERVING)
    state["bmc"] = {"state": "up"}
