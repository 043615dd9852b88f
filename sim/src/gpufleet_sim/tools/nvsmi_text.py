"""`nvidia-smi -q [-d TYPES]`: the 590-driver text layout (labels padded to column 54, 4-space indents),
section order as on tests/fixtures/real/nvidia-smi-text/utku-h100-80gb-hbm3-590.48.01-load-q.txt; one
block per GPU followed by a blank line, as on the 8-GPU gpud capture."""

from __future__ import annotations

import time

from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c

# (label, value) is a "label : value" row, (label, [children]) a section heading.
TNode = tuple[str, str | list["TNode"]]

WIDTH = 54

# -d TYPE -> the top-level sections it shows (the names nvidia-smi -h lists).
DISPLAY: dict[str, tuple[str, ...]] = {
    "MEMORY": ("FB Memory Usage", "BAR1 Memory Usage", "Conf Compute Protected Memory Usage"),
    "UTILIZATION": ("Utilization",),
    "ECC": ("ECC Mode", "ECC Errors"),
    "TEMPERATURE": ("Temperature",),
    "POWER": ("GPU Power Readings", "Power Samples", "GPU Memory Power Readings ", "Module Power Readings"),
    "CLOCK": (
        "Clocks",
        "Applications Clocks",
        "Default Applications Clocks",
        "Deferred Clocks",
        "Max Clocks",
        "Max Customer Boost Clocks",
        "Clock Policy",
    ),
    "COMPUTE": ("Compute Mode",),
    "PIDS": ("Processes",),
    "PERFORMANCE": ("Performance State", "Clocks Event Reasons", "Clocks Event Reasons Counters"),
    "PAGE_RETIREMENT": ("Retired Pages",),
    "ROW_REMAPPER": ("Remapped Rows",),
    "ACCOUNTING": ("Accounting Mode", "Accounting Mode Buffer Size"),
    "ENCODER_STATS": ("Encoder Stats",),
    "FBC_STATS": ("FBC Stats",),
    "GSP_FIRMWARE_VERSION": ("GSP Firmware Version",),
    "POWER_SMOOTHING": ("Power Smoothing",),
    "POWER_PROFILES": ("Workload Power Profiles",),
}


def render(state: State, selected: list[tuple[int, c.Gpu]], attached: int, display: set[str] | None) -> str:
    wanted = None if display is None else {s for d in display for s in DISPLAY[d]}
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        _row(0, "Timestamp", time.asctime()),
        _row(0, "Driver Version", str(state["driver_version"])),
        _row(0, "CUDA Version", str(state["cuda_version"])),
        "",
        _row(0, "Attached GPUs", str(attached)),
    ]
    for index, gpu in selected:
        lines.append(f"GPU {gpu['pci_bus_id']}")
        for node in gpu_sections(state, index, gpu, samples=wanted is not None):
            if wanted is None or node[0] in wanted:
                lines.extend(_emit(node, 1))
        lines.append("")
    return "\n".join(lines) + "\n"


def _row(depth: int, label: str, value: str) -> str:
    return f"{' ' * (4 * depth) + label:<{WIDTH}} : {value}"


def _emit(node: TNode, depth: int) -> list[str]:
    label, value = node
    if isinstance(value, str):
        return [_row(depth, label, value)]
    lines = [" " * (4 * depth) + label]
    for child in value:
        lines.extend(_emit(child, depth + 1))
    return lines


def _na(*labels: str) -> list[TNode]:
    return [(label, c.NA) for label in labels]


def gpu_sections(state: State, index: int, gpu: c.Gpu, samples: bool = False) -> list[TNode]:
    domain, bus, device, _ = c.bus_parts(str(gpu["pci_bus_id"]))
    power = [("GPU Power Readings", _gpu_power(gpu))]
    if samples:
        # -d POWER adds the sample window; the 590 driver answers "Not Found" without a sampling client
        # (NVIDIA/open-gpu-kernel-modules#483).
        names = ("Duration", "Number of Samples", "Max", "Min", "Avg")
        power.append(("Power Samples", [(name, "Not Found") for name in names]))
    return [
        ("Product Name", str(gpu["name"])),
        ("Product Brand", "NVIDIA"),
        ("Product Architecture", c.architecture(gpu)),
        ("Display Mode", c.DEPRECATED),
        ("Display Attached", "No"),
        ("Display Active", "Disabled"),
        ("Persistence Mode", c.enabled(bool(gpu["persistence_mode"]))),
        ("Addressing Mode", "None"),
        ("MIG Mode", [("Current", "Disabled"), ("Pending", "Disabled")]),
        ("Accounting Mode", "Disabled"),
        ("Accounting Mode Buffer Size", "4000"),
        ("Driver Model", _na("Current", "Pending")),
        ("Serial Number", str(gpu["serial"])),
        ("GPU UUID", str(gpu["uuid"])),
        ("GPU PDI", c.pdi(gpu)),
        ("Minor Number", str(gpu["slot"])),
        ("VBIOS Version", str(gpu["vbios_version"])),
        ("MultiGPU Board", "No"),
        ("Board ID", c.board_id(gpu)),
        ("Board Part Number", str(gpu["board_part_number"])),
        ("GPU Part Number", c.gpu_part_number(gpu)),
        ("FRU Part Number", c.NA),
        (
            "Platform Info",
            [
                *_na("Chassis Serial Number", "Slot Number", "Tray Index", "Host ID", "Peer Type"),
                ("Module Id", str(gpu["module_id"])),
                ("GPU Fabric GUID", c.NA),
            ],
        ),
        (
            "Inforom Version",
            [
                ("Image Version", c.inforom_image(gpu)),
                ("OEM Object", "2.1"),
                ("ECC Object", "7.16"),
                ("Power Management Object", c.NA),
            ],
        ),
        ("Inforom BBX Object Flush", _na("Latest Timestamp", "Latest Duration")),
        ("GPU Operation Mode", _na("Current", "Pending")),
        ("GPU C2C Mode", "Disabled"),
        (
            "GPU Virtualization Mode",
            [("Virtualization Mode", "None"), *_na("Host VGPU Mode", "vGPU Heterogeneous Mode")],
        ),
        ("GPU Recovery Action", c.recovery_action(gpu)),
        ("GSP Firmware Version", str(state["driver_version"])),
        ("IBMNPU", _na("Relaxed Ordering Mode")),
        ("PCI", _pci(gpu, domain, bus, device)),
        ("Fan Speed", c.NA),
        ("Performance State", c.performance_state(gpu)),
        ("Clocks Event Reasons", _reasons(gpu)),
        (
            "Clocks Event Reasons Counters",
            [(label, f"{c.reason_counter_us(gpu, name)} us") for name, _, label in c.REASON_COUNTERS],
        ),
        ("Sparse Operation Mode", "Disabled"),
        *_memory(gpu),
        ("Compute Mode", "Default"),
        (
            "Utilization",
            [
                ("GPU", f"{int(gpu['utilization_pct'])} %"),
                ("Memory", f"{c.memory_util(gpu)} %"),
                ("Encoder", "0 %"),
                ("Decoder", "0 %"),
                ("JPEG", "0 %"),
                ("OFA", "0 %"),
            ],
        ),
        ("Encoder Stats", [("Active Sessions", "0"), ("Average FPS", "0"), ("Average Latency", "0")]),
        ("FBC Stats", [("Active Sessions", "0"), ("Average FPS", "0"), ("Average Latency", "0")]),
        ("DRAM Encryption Mode", _na("Current", "Pending")),
        ("ECC Mode", [("Current", "Enabled"), ("Pending", "Enabled")]),
        ("ECC Errors", _ecc(gpu)),
        ("Retired Pages", _na("Single Bit ECC", "Double Bit ECC", "Pending Page Blacklist")),
        ("Remapped Rows", _remapped_rows(gpu)),
        ("Temperature", _temperature(gpu)),
        *power,
        ("GPU Memory Power Readings ", _na("Average Power Draw", "Instantaneous Power Draw")),
        (
            "Module Power Readings",
            _na(
                "Average Power Draw",
                "Instantaneous Power Draw",
                "Current Power Limit",
                "Requested Power Limit",
                "Default Power Limit",
                "Min Power Limit",
                "Max Power Limit",
            ),
        ),
        ("Power Smoothing", c.NA),
        ("Workload Power Profiles", _na("Requested Profiles", "Enforced Profiles")),
        ("EDPp Multiplier", "100.00%"),
        *_clocks(gpu),
        ("Fabric", _fabric(gpu)),
        ("Processes", "None"),
        ("Capabilities", [("EGM", "disabled")]),
    ]


_GEN_LABELS = ("Max", "Current", "Device Current", "Device Max", "Host Max")


def _pci(gpu: c.Gpu, domain: int, bus: int, device: int) -> list[TNode]:
    pcie = c.pcie_link(gpu)
    tx, rx = c.pcie_throughput_kbs(gpu)
    gens = (pcie.gen_max, pcie.gen_current, pcie.gen_current, pcie.gen_device_max, pcie.gen_host_max)
    link: list[TNode] = [
        (
            "PCIe Generation",
            [(label, str(gen)) for label, gen in zip(_GEN_LABELS, gens, strict=True)],
        ),
        ("Link Width", [("Max", f"{pcie.width_max}x"), ("Current", f"{pcie.width_current}x")]),
    ]
    return [
        ("Bus", f"0x{bus:02X}"),
        ("Device", f"0x{device:02X}"),
        ("Domain", f"0x{domain:04X}"),
        ("Base Classcode", "0x3"),
        ("Sub Classcode", "0x2"),
        ("Device Id", "0x" + c.hex_id(str(gpu["pci_device_id"]))),
        ("Bus Id", str(gpu["pci_bus_id"])),
        ("Sub System Id", "0x" + c.hex_id(str(gpu["pci_subsystem_id"]))),
        ("GPU Link Info", link),
        ("Bridge Chip", _na("Type", "Firmware")),
        ("Replays Since Reset", str(c.replay_counter(gpu))),
        ("Replay Number Rollovers", "0"),
        ("Tx Throughput", f"{tx} KB/s"),
        ("Rx Throughput", f"{rx} KB/s"),
        ("Atomic Caps Outbound", "FETCHADD_32 FETCHADD_64 SWAP_32 SWAP_64 CAS_32 CAS_64 "),
        ("Atomic Caps Inbound", c.NA),
    ]


def _reasons(gpu: c.Gpu) -> list[TNode]:
    def r(name: str) -> str:
        return c.reason_text(gpu, name)

    # HW Thermal / HW Power Brake are children of HW Slowdown in the text layout.
    return [
        ("Idle", r("gpu_idle")),
        ("Applications Clocks Setting", r("applications_clocks_setting")),
        ("SW Power Cap", r("sw_power_cap")),
        ("HW Slowdown", r("hw_slowdown")),
        ("    HW Thermal Slowdown", r("hw_thermal_slowdown")),
        ("    HW Power Brake Slowdown", r("hw_power_brake_slowdown")),
        ("Sync Boost", r("sync_boost")),
        ("SW Thermal Slowdown", r("sw_thermal_slowdown")),
        ("Display Clock Setting", r("display_clocks_setting")),
    ]


def _memory(gpu: c.Gpu) -> list[TNode]:
    total, reserved, used, free = c.fb_memory(gpu)
    b_total, b_used, b_free = c.bar1_memory(gpu)
    return [
        (
            "FB Memory Usage",
            [
                ("Total", f"{total} MiB"),
                ("Reserved", f"{reserved} MiB"),
                ("Used", f"{used} MiB"),
                ("Free", f"{free} MiB"),
            ],
        ),
        (
            "BAR1 Memory Usage",
            [("Total", f"{b_total} MiB"), ("Used", f"{b_used} MiB"), ("Free", f"{b_free} MiB")],
        ),
        ("Conf Compute Protected Memory Usage", [("Total", "0 MiB"), ("Used", "0 MiB"), ("Free", "0 MiB")]),
    ]


def _ecc(gpu: c.Gpu) -> list[TNode]:
    ecc = gpu["ecc"]

    def counts(uncorrected: int) -> list[TNode]:
        return [
            ("SRAM Correctable", "0"),
            ("SRAM Uncorrectable Parity", "0"),
            ("SRAM Uncorrectable SEC-DED", "0"),
            ("DRAM Correctable", "0"),
            ("DRAM Uncorrectable", str(uncorrected)),
        ]

    return [
        ("Volatile", counts(int(ecc["volatile_uncorrected"]))),
        ("Aggregate", [*counts(int(ecc["aggregate_uncorrected"])), ("SRAM Threshold Exceeded", "No")]),
        (
            "Aggregate Uncorrectable SRAM Sources",
            [(n, "0") for n in ("SRAM L2", "SRAM SM", "SRAM Microcontroller", "SRAM PCIE", "SRAM Other")],
        ),
        ("Channel Repair Pending", "No"),
        ("TPC Repair Pending", "No"),
        ("Unrepairable Memory", "No"),
    ]


def _remapped_rows(gpu: c.Gpu) -> list[TNode]:
    rows = gpu["remapped_rows"]
    histogram: list[TNode] = [
        ("Max", f"{c.remap_banks(gpu)} bank(s)"),
        *[(n, "0 bank(s)") for n in ("High", "Partial", "Low", "None")],
    ]
    return [
        ("Correctable Error", str(int(rows["correctable"]))),
        ("Uncorrectable Error", str(int(rows["uncorrectable"]))),
        ("Pending", c.yes_no(bool(rows["pending"]))),
        ("Remapping Failure Occurred", c.yes_no(bool(rows["failure"]))),
        ("Bank Remap Availability Histogram", histogram),
    ]


def _temperature(gpu: c.Gpu) -> list[TNode]:
    temp = gpu["temperature"]
    shutdown, slowdown, max_op = c.tlimit_thresholds(gpu)
    return [
        ("GPU Current Temp", f"{int(temp['gpu_c'])} C"),
        ("GPU T.Limit Temp", f"{c.tlimit_c(gpu)} C"),
        ("GPU Shutdown T.Limit Temp", f"{shutdown} C"),
        ("GPU Slowdown T.Limit Temp", f"{slowdown} C"),
        ("GPU Max Operating T.Limit Temp", f"{max_op} C"),
        ("GPU Target Temperature", c.NA),
        ("Memory Current Temp", f"{int(temp['memory_c'])} C"),
        ("Memory Max Operating T.Limit Temp", "0 C"),
    ]


def _gpu_power(gpu: c.Gpu) -> list[TNode]:
    power = gpu["power"]
    return [
        ("Average Power Draw", c.watts(float(power["draw_w"]))),
        ("Instantaneous Power Draw", c.watts(float(power["draw_w"]))),
        ("Current Power Limit", c.watts(float(power["enforced_limit_w"]))),
        ("Requested Power Limit", c.watts(float(power["requested_limit_w"]))),
        ("Default Power Limit", c.watts(float(power["default_limit_w"]))),
        ("Min Power Limit", c.watts(float(power["min_limit_w"]))),
        ("Max Power Limit", c.watts(float(power["max_limit_w"]))),
    ]


def _clocks(gpu: c.Gpu) -> list[TNode]:
    clk = gpu["clocks"]
    graphics, max_gr = int(clk["graphics_mhz"]), int(clk["max_graphics_mhz"])
    deprecated: list[TNode] = [("Graphics", c.DEPRECATED), ("Memory", c.DEPRECATED)]
    return [
        (
            "Clocks",
            [
                ("Graphics", f"{graphics} MHz"),
                ("SM", f"{int(clk['sm_mhz'])} MHz"),
                ("Memory", f"{int(clk['memory_mhz'])} MHz"),
                ("Video", f"{c.video_clock(graphics)} MHz"),
            ],
        ),
        ("Applications Clocks", deprecated),
        ("Default Applications Clocks", deprecated),
        ("Deferred Clocks", _na("Memory")),
        (
            "Max Clocks",
            [
                ("Graphics", f"{max_gr} MHz"),
                ("SM", f"{max_gr} MHz"),
                ("Memory", f"{int(clk['max_memory_mhz'])} MHz"),
                ("Video", f"{c.video_clock(max_gr)} MHz"),
            ],
        ),
        ("Max Customer Boost Clocks", [("Graphics", f"{max_gr} MHz")]),
        ("Clock Policy", _na("Auto Boost", "Auto Boost Default")),
    ]


def _fabric(gpu: c.Gpu) -> list[TNode]:
    state, status = c.fabric(gpu)
    health = _na(
        "Summary",
        "Bandwidth",
        "Route Recovery in progress",
        "Route Unhealthy",
        "Access Timeout Recovery",
        "Incorrect Configuration",
    )
    return [
        ("State", state),
        ("Status", status),
        ("CliqueId", "0"),
        ("ClusterUUID", "00000000-0000-0000-0000-000000000000"),
        ("Health", health),
    ]
