"""`nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]`.

Field names, aliases and header units are those of `nvidia-smi --help-query-gpu` and the 590-driver
CSV capture (tests/fixtures/real/nvidia-smi-csv/utku-h100-80gb-hbm3-590.48.01-load-query-gpu.csv):
the header names the canonical field even when an alias was asked for ("gpu_name" -> "name").
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

from gpufleet_sim.state import State
from gpufleet_sim.tools import nvsmi_common as c


@dataclass(frozen=True)
class Row:
    state: State
    index: int
    gpu: c.Gpu
    count: int  # GPUs in the system, whatever -i selects


@dataclass(frozen=True)
class Field:
    names: tuple[str, ...]  # canonical first, then aliases
    unit: str  # "" when the header has no [unit]
    value: Callable[[Row], str]  # c.NA / c.DEPRECATED print as [N/A] / [Requested ...]


def _g(*path: str) -> Callable[[Row], str]:
    def read(row: Row) -> str:
        node = row.gpu
        for key in path:
            node = node[key]
        return str(node)

    return read


def _w(*path: str) -> Callable[[Row], str]:
    def read(row: Row) -> str:
        return f"{float(_g(*path)(row)):.2f}"

    return read


def _const(text: str) -> Callable[[Row], str]:
    return lambda row: text


def _reason(name: str) -> Field:
    return Field(
        (f"clocks_event_reasons.{name}", f"clocks_throttle_reasons.{name}"),
        "",
        lambda row: c.reason_text(row.gpu, name),
    )


def _counter(name: str) -> Field:
    # The 590 capture has no clocks_throttle_reasons_counters alias.
    return Field(
        (f"clocks_event_reasons_counters.{name}",), "us", lambda row: str(c.reason_counter_us(row.gpu, name))
    )


def _pcie(name: str) -> Callable[[Row], str]:
    return lambda row: str(getattr(c.pcie_link(row.gpu), name))


def _bus(part: int, digits: int) -> Callable[[Row], str]:
    return lambda row: f"0x{c.bus_parts(str(row.gpu['pci_bus_id']))[part]:0{digits}X}"


FIELDS: list[Field] = [
    Field(("timestamp",), "", lambda row: datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]),
    Field(("driver_version",), "", lambda row: str(row.state["driver_version"])),
    Field(("count",), "", lambda row: str(row.count)),
    Field(("name", "gpu_name"), "", _g("name")),
    Field(("serial", "gpu_serial"), "", _g("serial")),
    Field(("uuid", "gpu_uuid"), "", _g("uuid")),
    Field(("pci.bus_id", "gpu_bus_id"), "", _g("pci_bus_id")),
    Field(("pci.domain",), "", _bus(0, 4)),
    Field(("pci.bus",), "", _bus(1, 2)),
    Field(("pci.device",), "", _bus(2, 2)),
    Field(("pci.device_id",), "", lambda row: "0x" + c.hex_id(str(row.gpu["pci_device_id"]))),
    Field(("pci.sub_device_id",), "", lambda row: "0x" + c.hex_id(str(row.gpu["pci_subsystem_id"]))),
    Field(("pcie.link.gen.current",), "", _pcie("gen_current")),
    Field(("pcie.link.gen.gpucurrent",), "", _pcie("gen_current")),
    Field(("pcie.link.gen.max",), "", _pcie("gen_max")),
    Field(("pcie.link.gen.gpumax",), "", _pcie("gen_device_max")),
    Field(("pcie.link.gen.hostmax",), "", _pcie("gen_host_max")),
    Field(("pcie.link.width.current",), "", _pcie("width_current")),
    Field(("pcie.link.width.max",), "", _pcie("width_max")),
    Field(("index",), "", lambda row: str(row.index)),
    Field(("display_mode",), "", _const(c.DEPRECATED)),
    Field(("display_active",), "", _const("Disabled")),
    Field(("persistence_mode",), "", lambda row: c.enabled(bool(row.gpu["persistence_mode"]))),
    Field(("addressing_mode",), "", _const("None")),
    Field(("accounting.mode",), "", _const("Disabled")),
    Field(("vbios_version",), "", _g("vbios_version")),
    Field(("inforom.img", "inforom.image"), "", lambda row: c.inforom_image(row.gpu)),
    Field(("gpu_recovery_action",), "", lambda row: c.recovery_action(row.gpu)),
    Field(("fan.speed",), "%", _const(c.NA)),
    Field(("pstate",), "", lambda row: c.performance_state(row.gpu)),
    Field(
        ("clocks_event_reasons.supported", "clocks_throttle_reasons.supported"),
        "",
        _const(f"0x{c.SUPPORTED_REASONS_MASK:016X}"),
    ),
    Field(
        ("clocks_event_reasons.active", "clocks_throttle_reasons.active"),
        "",
        lambda row: f"0x{c.reason_mask(row.gpu):016X}",
    ),
    *[_reason(name) for name in c.REASON_BITS if name != "display_clocks_setting"],
    *[_counter(name) for name, _, _ in c.REASON_COUNTERS],
    Field(("memory.total",), "MiB", lambda row: str(c.fb_memory(row.gpu)[0])),
    Field(("memory.reserved",), "MiB", lambda row: str(c.fb_memory(row.gpu)[1])),
    Field(("memory.used",), "MiB", lambda row: str(c.fb_memory(row.gpu)[2])),
    Field(("memory.free",), "MiB", lambda row: str(c.fb_memory(row.gpu)[3])),
    Field(("compute_mode",), "", _const("Default")),
    Field(("compute_cap",), "", _g("compute_cap")),
    Field(("utilization.gpu",), "%", _g("utilization_pct")),
    Field(("utilization.memory",), "%", lambda row: str(c.memory_util(row.gpu))),
    Field(("ecc.mode.current",), "", _const("Enabled")),
    Field(("ecc.mode.pending",), "", _const("Enabled")),
    Field(("ecc.errors.corrected.volatile.total",), "", _const("0")),
    Field(("ecc.errors.corrected.aggregate.total",), "", _const("0")),
    Field(("ecc.errors.uncorrected.volatile.dram",), "", _g("ecc", "volatile_uncorrected")),
    Field(("ecc.errors.uncorrected.volatile.total",), "", _g("ecc", "volatile_uncorrected")),
    Field(("ecc.errors.uncorrected.aggregate.dram",), "", _g("ecc", "aggregate_uncorrected")),
    Field(("ecc.errors.uncorrected.aggregate.total",), "", _g("ecc", "aggregate_uncorrected")),
    Field(("retired_pages.single_bit_ecc.count", "retired_pages.sbe"), "", _const(c.NA)),
    Field(("retired_pages.double_bit.count", "retired_pages.dbe"), "", _const(c.NA)),
    Field(("retired_pages.pending",), "", _const(c.NA)),
    Field(("remapped_rows.correctable", "remapped_rows.sbe"), "", _g("remapped_rows", "correctable")),
    Field(("remapped_rows.uncorrectable", "remapped_rows.dbe"), "", _g("remapped_rows", "uncorrectable")),
    Field(("remapped_rows.pending",), "", lambda row: c.yes_no(bool(row.gpu["remapped_rows"]["pending"]))),
    Field(("remapped_rows.failure",), "", lambda row: c.yes_no(bool(row.gpu["remapped_rows"]["failure"]))),
    Field(("temperature.gpu",), "", _g("temperature", "gpu_c")),
    Field(("temperature.gpu.tlimit",), "", lambda row: str(c.tlimit_c(row.gpu))),
    Field(("temperature.memory",), "", _g("temperature", "memory_c")),
    Field(("power.management",), "", _const(c.DEPRECATED)),
    Field(("power.draw",), "W", _w("power", "draw_w")),
    Field(("power.draw.average", "gpu.power.draw.average"), "W", _w("power", "draw_w")),
    Field(("power.draw.instant", "gpu.power.draw.instant"), "W", _w("power", "draw_w")),
    Field(("power.limit", "gpu.power.requested_limit"), "W", _w("power", "requested_limit_w")),
    Field(("enforced.power.limit", "gpu.power.current_limit"), "W", _w("power", "enforced_limit_w")),
    Field(("power.default_limit", "gpu.power.default_limit"), "W", _w("power", "default_limit_w")),
    Field(("power.min_limit", "gpu.power.min_limit"), "W", _w("power", "min_limit_w")),
    Field(("power.max_limit", "gpu.power.max_limit"), "W", _w("power", "max_limit_w")),
    Field(("module.power.draw.average",), "W", _const(c.NA)),
    Field(("module.power.draw.instant",), "W", _const(c.NA)),
    Field(("module.power.limit", "module.power.requested_limit"), "W", _const(c.NA)),
    Field(("module.enforced.power.limit", "module.power.current_limit"), "W", _const(c.NA)),
    Field(("edpp_multiplier",), "%", _const("100.00")),
    Field(("clocks.current.graphics", "clocks.gr"), "MHz", _g("clocks", "graphics_mhz")),
    Field(("clocks.current.sm", "clocks.sm"), "MHz", _g("clocks", "sm_mhz")),
    Field(("clocks.current.memory", "clocks.mem"), "MHz", _g("clocks", "memory_mhz")),
    Field(
        ("clocks.current.video", "clocks.video"),
        "MHz",
        lambda row: str(c.video_clock(int(row.gpu["clocks"]["graphics_mhz"]))),
    ),
    Field(("clocks.applications.graphics", "clocks.applications.gr"), "MHz", _const(c.DEPRECATED)),
    Field(("clocks.applications.memory", "clocks.applications.mem"), "MHz", _const(c.DEPRECATED)),
    Field(("clocks.max.graphics", "clocks.max.gr"), "MHz", _g("clocks", "max_graphics_mhz")),
    Field(("clocks.max.sm",), "MHz", _g("clocks", "max_graphics_mhz")),
    Field(("clocks.max.memory", "clocks.max.mem"), "MHz", _g("clocks", "max_memory_mhz")),
    Field(("mig.mode.current",), "", _const("Disabled")),
    Field(("mig.mode.pending",), "", _const("Disabled")),
    Field(("c2c.mode",), "", _const("Disabled")),
    Field(("fabric.state",), "", lambda row: c.fabric(row.gpu)[0]),
    Field(("fabric.status",), "", lambda row: c.fabric(row.gpu)[1]),
    Field(("platform.module_id",), "", _g("module_id")),
]

_BY_NAME: dict[str, Field] = {name: f for f in FIELDS for name in f.names}


def parse_fields(query: str) -> list[Field]:
    fields = []
    for raw in query.split(","):
        name = raw.strip()
        if name not in _BY_NAME:
            # Real wording and layout (message on stdout, then an empty line): a captured session
            # running `nvidia-smi --query-gpu=driver_version,cuda_version ... 2>/dev/null`.
            raise c.ToolError(f'Field "{name}" is not a valid field to query.\n\n', c.RC_INVALID_ARGUMENT)
        fields.append(_BY_NAME[name])
    return fields


def render(
    state: State,
    selected: list[tuple[int, c.Gpu]],
    attached: int,
    fields: list[Field],
    header: bool,
    units: bool,
) -> str:
    lines = []
    if header:
        lines.append(", ".join(f.names[0] + (f" [{f.unit}]" if f.unit else "") for f in fields))
    for index, gpu in selected:
        row = Row(state, index, gpu, attached)
        lines.append(", ".join(_cell(f, row, units) for f in fields))
    return "".join(line + "\n" for line in lines)


def _cell(field: Field, row: Row, units: bool) -> str:
    value = field.value(row)
    if value in (c.NA, c.DEPRECATED):
        return f"[{value}]"
    return f"{value} {field.unit}" if units and field.unit else value
