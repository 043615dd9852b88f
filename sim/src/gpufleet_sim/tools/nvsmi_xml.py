"""`nvidia-smi -q -x`: the v13 schema, element order as on the 590-driver Blackwell capture
(tests/fixtures/real/nvidia-smi-xml/telegraf-pro-6000-maxq-blackwell-v13.xml), with the values a
datacenter GPU prints."""

from __future__ import annotations

import time
from xml.sax.saxutils import escape, quoteattr

from gpufleet_sim.faults_tools import oversized
from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c

# (tag, value) for a leaf, (tag, [children]) for a block; a bare str child is a text line ("None").
XNode = tuple[str, str | list["XNode | str"]]

HEADER = '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n'


def render(state: State, selected: list[tuple[int, c.Gpu]], attached: int) -> str:
    out = [HEADER, "<nvidia_smi_log>\n"]
    top: list[XNode | str] = [
        ("timestamp", time.asctime()),
        ("driver_version", str(state["driver_version"])),
        ("cuda_version", str(state["cuda_version"])),
        ("attached_gpus", str(attached)),
    ]
    out.extend(_emit(node, 1) for node in top)
    for position, (index, gpu) in enumerate(selected):
        out.append(f"\t<gpu id={quoteattr(str(gpu['pci_bus_id']))}>\n")
        children = gpu_children(state, index, gpu)
        if position == 0:
            # the nvsmi-oversized-field fault (sim/faults_tools.py): the first GPU's product name
            children[0] = ("product_name", oversized(state, str(gpu["name"])))
        out.extend(_emit(node, 2) for node in children)
        out.append("\t</gpu>\n\n")
    out.append("</nvidia_smi_log>\n")
    return "".join(out)


def _emit(node: XNode | str, depth: int) -> str:
    pad = "\t" * depth
    if isinstance(node, str):
        return f"{pad}{escape(node)}\n"
    tag, value = node
    if isinstance(value, str):
        return f"{pad}<{tag}>{escape(value)}</{tag}>\n"
    inner = "".join(_emit(child, depth + 1) for child in value)
    return f"{pad}<{tag}>\n{inner}{pad}</{tag}>\n"


def _na(*tags: str) -> list[XNode | str]:
    return [(tag, c.NA) for tag in tags]


def gpu_children(state: State, index: int, gpu: c.Gpu) -> list[XNode | str]:
    domain, bus, device, _ = c.bus_parts(str(gpu["pci_bus_id"]))
    mig: list[XNode | str] = [("current_mig", "Disabled"), ("pending_mig", "Disabled")]
    return [
        ("product_name", str(gpu["name"])),
        ("product_brand", "NVIDIA"),
        ("product_architecture", c.architecture(gpu)),
        ("display_mode", c.DEPRECATED),
        ("display_attached", "No"),
        ("display_active", "Disabled"),
        ("persistence_mode", c.enabled(bool(gpu["persistence_mode"]))),
        ("addressing_mode", "None"),
        ("mig_mode", mig),
        ("mig_devices", ["None"]),
        ("accounting_mode", "Disabled"),
        ("accounting_mode_buffer_size", "4000"),
        ("driver_model", _na("current_dm", "pending_dm")),
        ("serial", str(gpu["serial"])),
        ("uuid", str(gpu["uuid"])),
        ("pdi", c.pdi(gpu)),
        ("minor_number", str(gpu["slot"])),
        ("vbios_version", str(gpu["vbios_version"])),
        ("multigpu_board", "No"),
        ("board_id", c.board_id(gpu)),
        ("board_part_number", str(gpu["board_part_number"])),
        ("gpu_part_number", c.gpu_part_number(gpu)),
        ("gpu_fru_part_number", c.NA),
        ("platformInfo", _platform(gpu)),
        (
            "inforom_version",
            [
                ("img_version", c.inforom_image(gpu)),
                ("oem_object", "2.1"),
                ("ecc_object", "7.16"),
                ("pwr_object", c.NA),
            ],
        ),
        ("inforom_bbx_flush", _na("latest_timestamp", "latest_duration")),
        ("gpu_operation_mode", _na("current_gom", "pending_gom")),
        ("c2c_mode", "Disabled"),
        (
            "gpu_virtualization_mode",
            [("virtualization_mode", "None"), ("host_vgpu_mode", c.NA), ("vgpu_heterogeneous_mode", c.NA)],
        ),
        ("gpu_recovery_action", c.recovery_action(gpu)),
        ("gsp_firmware_version", str(state["driver_version"])),
        ("ibmnpu", _na("relaxed_ordering_mode")),
        ("pci", _pci(gpu, domain, bus, device)),
        ("fan_speed", c.NA),
        ("performance_state", c.performance_state(gpu)),
        (
            "clocks_event_reasons",
            [(f"clocks_event_reason_{n}", c.reason_text(gpu, n)) for n in c.REASON_BITS],
        ),
        ("clocks_event_reasons_counters", _reason_counters(gpu)),
        ("sparse_operation_mode", "Disabled"),
        *_memory(gpu),
        ("compute_mode", "Default"),
        ("utilization", _utilization(gpu)),
        ("encoder_stats", [("session_count", "0"), ("average_fps", "0"), ("average_latency", "0")]),
        ("fbc_stats", [("session_count", "0"), ("average_fps", "0"), ("average_latency", "0")]),
        ("dram_encryption_mode", _na("current_dram_encryption", "pending_dram_encryption")),
        ("ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")]),
        ("ecc_errors", _ecc(gpu)),
        ("retired_pages", _retired_pages()),
        ("remapped_rows", _remapped_rows(gpu)),
        ("temperature", _temperature(gpu)),
        ("supported_gpu_target_temp", _na("gpu_target_temp_min", "gpu_target_temp_max")),
        ("gpu_power_readings", _gpu_power(gpu)),
        ("gpu_memory_power_readings", _na("average_power_draw", "instant_power_draw")),
        ("module_power_readings", _module_power()),
        ("power_smoothing", c.NA),
        ("power_profiles", _na("power_profile_requested_profiles", "power_profile_enforced_profiles")),
        ("edpp_multiplier", "100.00%"),
        *_clocks(gpu),
        ("fabric", _fabric(gpu)),
        ("supported_clocks", [("supported_mem_clock", _supported_clocks(gpu))]),
        ("processes", []),
        ("accounted_processes", []),
        ("capabilities", [("egm", "disabled")]),
    ]


def _platform(gpu: c.Gpu) -> list[XNode | str]:
    return [
        ("chassis_serial_number", ""),
        ("slot_number", "0"),
        ("tray_index", "0"),
        ("host_id", "1"),
        ("peer_type", "Direct Connected"),
        ("module_id", str(gpu["module_id"])),
        ("gpu_fabric_guid", "0x0000000000000000"),
    ]


def _pci(gpu: c.Gpu, domain: int, bus: int, device: int) -> list[XNode | str]:
    pcie = c.pcie_link(gpu)
    tx, rx = c.pcie_throughput_kbs(gpu)
    link: list[XNode | str] = [
        (
            "pcie_gen",
            [
                ("max_link_gen", str(pcie.gen_max)),
                ("current_link_gen", str(pcie.gen_current)),
                ("device_current_link_gen", str(pcie.gen_current)),
                ("max_device_link_gen", str(pcie.gen_device_max)),
                ("max_host_link_gen", str(pcie.gen_host_max)),
            ],
        ),
        (
            "link_widths",
            [("max_link_width", f"{pcie.width_max}x"), ("current_link_width", f"{pcie.width_current}x")],
        ),
    ]
    return [
        ("pci_bus", f"{bus:02X}"),
        ("pci_device", f"{device:02X}"),
        ("pci_domain", f"{domain:04X}"),
        ("pci_base_class", "3"),
        ("pci_sub_class", "2"),
        ("pci_device_id", c.hex_id(str(gpu["pci_device_id"]))),
        ("pci_bus_id", str(gpu["pci_bus_id"])),
        ("pci_sub_system_id", c.hex_id(str(gpu["pci_subsystem_id"]))),
        ("pci_gpu_link_info", link),
        ("pci_bridge_chip", _na("bridge_chip_type", "bridge_chip_fw")),
        ("replay_counter", str(c.replay_counter(gpu))),
        ("replay_rollover_counter", "0"),
        ("tx_util", f"{tx} KB/s"),
        ("rx_util", f"{rx} KB/s"),
        ("atomic_caps_outbound", "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64 "),
        ("atomic_caps_inbound", c.NA),
    ]


def _reason_counters(gpu: c.Gpu) -> list[XNode | str]:
    return [
        (f"clocks_event_reasons_counters_{tag}", f"{c.reason_counter_us(gpu, name)} us")
        for name, tag, _ in c.REASON_COUNTERS
    ]


def _memory(gpu: c.Gpu) -> list[XNode | str]:
    total, reserved, used, free = c.fb_memory(gpu)
    b_total, b_used, b_free = c.bar1_memory(gpu)
    return [
        (
            "fb_memory_usage",
            [
                ("total", f"{total} MiB"),
                ("reserved", f"{reserved} MiB"),
                ("used", f"{used} MiB"),
                ("free", f"{free} MiB"),
            ],
        ),
        (
            "bar1_memory_usage",
            [("total", f"{b_total} MiB"), ("used", f"{b_used} MiB"), ("free", f"{b_free} MiB")],
        ),
        ("cc_protected_memory_usage", [("total", "0 MiB"), ("used", "0 MiB"), ("free", "0 MiB")]),
    ]


def _utilization(gpu: c.Gpu) -> list[XNode | str]:
    return [
        ("gpu_util", f"{int(gpu['utilization_pct'])} %"),
        ("memory_util", f"{c.memory_util(gpu)} %"),
        ("encoder_util", "0 %"),
        ("decoder_util", "0 %"),
        ("jpeg_util", "0 %"),
        ("ofa_util", "0 %"),
    ]


def _ecc(gpu: c.Gpu) -> list[XNode | str]:
    ecc = gpu["ecc"]

    def counts(uncorrected: int) -> list[XNode | str]:
        return [
            ("sram_correctable", "0"),
            ("sram_uncorrectable_parity", "0"),
            ("sram_uncorrectable_secded", "0"),
            ("dram_correctable", "0"),
            ("dram_uncorrectable", str(uncorrected)),
        ]

    sources = ("sram_l2", "sram_sm", "sram_microcontroller", "sram_pcie", "sram_other")
    return [
        ("volatile", counts(int(ecc["volatile_uncorrected"]))),
        ("aggregate", [*counts(int(ecc["aggregate_uncorrected"])), ("sram_threshold_exceeded", "No")]),
        ("aggregate_uncorrectable_sram_sources", [(name, "0") for name in sources]),
        ("channel_repair_pending", "No"),
        ("tpc_repair_pending", "No"),
        ("unrepairable_memory", "No"),
    ]


def _retired_pages() -> list[XNode | str]:
    # HBM GPUs remap rows instead of retiring pages: every field is N/A, as on the H100 capture.
    return [
        ("multiple_single_bit_retirement", _na("retired_count", "retired_pagelist")),
        ("double_bit_retirement", _na("retired_count", "retired_pagelist")),
        ("pending_blacklist", c.NA),
        ("pending_retirement", c.NA),
    ]


def _remapped_rows(gpu: c.Gpu) -> list[XNode | str]:
    rows = gpu["remapped_rows"]
    histogram: list[XNode | str] = [
        ("row_remapper_histogram_max", f"{c.remap_banks(gpu)} bank(s)"),
        *[(f"row_remapper_histogram_{n}", "0 bank(s)") for n in ("high", "partial", "low", "none")],
    ]
    return [
        ("remapped_row_corr", str(int(rows["correctable"]))),
        ("remapped_row_unc", str(int(rows["uncorrectable"]))),
        ("remapped_row_pending", c.yes_no(bool(rows["pending"]))),
        ("remapped_row_failure", c.yes_no(bool(rows["failure"]))),
        ("row_remapper_histogram", histogram),
    ]


def _temperature(gpu: c.Gpu) -> list[XNode | str]:
    temp = gpu["temperature"]
    shutdown, slowdown, max_op = c.tlimit_thresholds(gpu)
    return [
        ("gpu_temp", f"{int(temp['gpu_c'])} C"),
        ("gpu_temp_tlimit", f"{c.tlimit_c(gpu)} C"),
        ("gpu_temp_max_tlimit_threshold", f"{shutdown} C"),
        ("gpu_temp_slow_tlimit_threshold", f"{slowdown} C"),
        ("gpu_temp_max_gpu_tlimit_threshold", f"{max_op} C"),
        ("gpu_target_temperature", c.NA),
        ("memory_temp", f"{int(temp['memory_c'])} C"),
        ("gpu_temp_max_mem_tlimit_threshold", "0 C"),
    ]


def _gpu_power(gpu: c.Gpu) -> list[XNode | str]:
    power = gpu["power"]
    return [
        ("power_state", c.DEPRECATED),
        ("average_power_draw", c.watts(float(power["draw_w"]))),
        ("instant_power_draw", c.watts(float(power["draw_w"]))),
        ("current_power_limit", c.watts(float(power["enforced_limit_w"]))),
        ("requested_power_limit", c.watts(float(power["requested_limit_w"]))),
        ("default_power_limit", c.watts(float(power["default_limit_w"]))),
        ("min_power_limit", c.watts(float(power["min_limit_w"]))),
        ("max_power_limit", c.watts(float(power["max_limit_w"]))),
    ]


def _module_power() -> list[XNode | str]:
    return [
        ("power_state", c.DEPRECATED),
        *_na(
            "average_power_draw",
            "instant_power_draw",
            "current_power_limit",
            "requested_power_limit",
            "default_power_limit",
            "min_power_limit",
            "max_power_limit",
        ),
    ]


def _clocks(gpu: c.Gpu) -> list[XNode | str]:
    clk = gpu["clocks"]
    graphics, sm, mem = int(clk["graphics_mhz"]), int(clk["sm_mhz"]), int(clk["memory_mhz"])
    max_gr, max_mem = int(clk["max_graphics_mhz"]), int(clk["max_memory_mhz"])
    deprecated: list[XNode | str] = [("graphics_clock", c.DEPRECATED), ("mem_clock", c.DEPRECATED)]
    return [
        (
            "clocks",
            [
                ("graphics_clock", f"{graphics} MHz"),
                ("sm_clock", f"{sm} MHz"),
                ("mem_clock", f"{mem} MHz"),
                ("video_clock", f"{c.video_clock(graphics)} MHz"),
            ],
        ),
        ("applications_clocks", deprecated),
        ("default_applications_clocks", deprecated),
        ("deferred_clocks", _na("mem_clock")),
        (
            "max_clocks",
            [
                ("graphics_clock", f"{max_gr} MHz"),
                ("sm_clock", f"{max_gr} MHz"),
                ("mem_clock", f"{max_mem} MHz"),
                ("video_clock", f"{c.video_clock(max_gr)} MHz"),
            ],
        ),
        ("max_customer_boost_clocks", [("graphics_clock", f"{max_gr} MHz")]),
        ("clock_policy", _na("auto_boost", "auto_boost_default")),
    ]


def _fabric(gpu: c.Gpu) -> list[XNode | str]:
    # NVSwitch-attached HGX GPUs report a completed fabric registration (H100 capture) unless a fault
    # says otherwise (c.fabric).
    state, status = c.fabric(gpu)
    health = _na(
        "summary",
        "bandwidth",
        "route_recovery_in_progress",
        "route_unhealthy",
        "access_timeout_recovery",
        "incorrect_configuration",
    )
    return [
        ("state", state),
        ("status", status),
        ("cliqueId", "0"),
        ("clusterUuid", "00000000-0000-0000-0000-000000000000"),
        ("health", health),
    ]


def _supported_clocks(gpu: c.Gpu) -> list[XNode | str]:
    mem = int(gpu["clocks"]["max_memory_mhz"])
    clocks: list[XNode | str] = [
        ("supported_graphics_clock", f"{mhz} MHz") for mhz in c.supported_graphics_clocks(gpu)
    ]
    return [("value", f"{mem} MHz"), *clocks]
