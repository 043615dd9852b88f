"""The run's metrics for node_exporter's textfile collector (gpufleet_<command>.prom).

Label sets are bounded: a host, the command, a status, an area or role, a GPU, a port, a vLLM
instance, a throttle reason. Which check failed and why stays in report.json: a check name in a
label makes a new series for every GPU UUID and port a fleet has ever had.

Every host-level series carries ``command`` (the report's first word: provision, drift, gate...) and
every HELP text is a constant, so the files of several commands can share one textfile directory.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet import atomic_file, quarantine
from gpufleet.checks import STATUSES, one_per_condition
from gpufleet.printable import printable
from gpufleet.report import Report, finished_timestamp

Labels = tuple[tuple[str, str], ...]

# name -> (TYPE, HELP), in the order the file lists them.
METRICS: dict[str, tuple[str, str]] = {
    "gpufleet_host_status": ("gauge", "1 for the host's status in the command's last run, 0 for the others."),
    "gpufleet_node_unsafe": (
        "gauge",
        "watch: 1 when a failed check makes the node unsafe to serve (a GPU gone, a blocking Xid or recovery "
        "action, uncorrectable ECC, a row remap, NVLink down, a RoCE port down, a GPU past its temperature "
        "limits), else 0.",
    ),
    "gpufleet_node_unsafe_class": (
        "gauge",
        "watch: 1 for each class of failure that makes the node unsafe to serve (docs/watch.md).",
    ),
    "gpufleet_node_quarantined": (
        "gauge",
        "watch --act: 1 for each class of failure for which gpufleet holds the node out of service "
        "(quarantined, kept out after its gate, or still drained from an earlier quarantine; "
        "docs/guardian.md).",
    ),
    "gpufleet_node_would_quarantine": (
        "gauge",
        "watch --act: 1 for each class of failure of a node gpufleet would take out of service but did not "
        "(the circuit breaker is open or would open, or a --check run).",
    ),
    "gpufleet_node_remediation": (
        "gauge",
        "watch --act: 1 for each remediation (action gpu_reset or reboot) the run took on the node, with its "
        "outcome (ok, failed, stopped; would in a --check run).",
    ),
    "gpufleet_node_replace_hardware": (
        "gauge",
        "watch --act: 1 for the class of failure that made the node replace hardware: it stays out until "
        "gpufleet release clears it.",
    ),
    "gpufleet_guardian_breaker_open": (
        "gauge",
        "watch --act: 1 while the circuit breaker is open (no node is taken out until a person closes it), "
        "else 0.",
    ),
    "gpufleet_guardian_breaker_used": (
        "gauge",
        "watch --act: nodes gpufleet took out of service within the breaker's window, this run's included.",
    ),
    "gpufleet_guardian_breaker_limit": (
        "gauge",
        "watch --act: the most nodes gpufleet may take out of service within the breaker's window.",
    ),
    "gpufleet_leaf_explains_failures": (
        "gauge",
        "watch --act: 1 for a leaf switch that explains its nodes' failures (down, or without PFC or ECN): "
        "no node behind it is quarantined for them.",
    ),
    "gpufleet_failed_checks": (
        "gauge",
        'Failed checks in the last run per area (the check name before the first "."); '
        "0 for an area that was checked and passed. Which ones: report.json.",
    ),
    "gpufleet_drifted_settings": (
        "gauge",
        'Settings that differ from the profile per role (the setting before the first "."; '
        'switch_qos for an NVUE path); role="all" is the host\'s total (not to be summed with the '
        "roles), 0 when nothing drifted. From drift and provision --check; drift --fix: 0 on a "
        "host it fixed.",
    ),
    "gpufleet_last_run_timestamp_seconds": ("gauge", "When the command's last run finished (Unix time)."),
    "gpufleet_last_run_hosts": ("gauge", "Hosts of the command's last run per status."),
    "gpufleet_last_run_interrupted": (
        "gauge",
        "1 when the command's last run was asked to stop (SIGINT, SIGTERM) while it ran, else 0.",
    ),
    "gpufleet_gpu_power_limit_watts": (
        "gauge",
        'GPU power limit: kind="requested" is what was asked for, kind="enforced" what holds '
        "(lower when a rack/PDU budget caps it).",
    ),
    "gpufleet_gpu_power_draw_watts": ("gauge", "GPU power draw, averaged over the watch window."),
    "gpufleet_gpu_temperature_celsius": ("gauge", "GPU temperature per sensor (gpu, memory)."),
    "gpufleet_gpu_tlimit_margin_celsius": (
        "gauge",
        "Degrees left before the GPU slows down for temperature (nvidia-smi's T.Limit).",
    ),
    "gpufleet_gpu_throttle_active": ("gauge", "1 while the clock event reason holds the GPU's clocks back."),
    "gpufleet_gpu_throttle_seconds_total": (
        "counter",
        "Time the clock event reason has held the clocks back.",
    ),
    "gpufleet_rdma_retransmits_per_second": ("gauge", "RoCE packet retransmits per second (watch window)."),
    "gpufleet_rdma_pause_seconds_per_second": (
        "gauge",
        "Seconds of PFC pause per second per priority (1 = paused all the time; watch window).",
    ),
    "gpufleet_rdma_rx_discards_per_second": (
        "gauge",
        "Received packets discarded per second (watch window).",
    ),
    "gpufleet_rdma_cnp_sent_per_second": ("gauge", "DCQCN congestion notifications sent per second."),
    "gpufleet_rdma_ecn_marked_per_second": ("gauge", "ECN-marked packets received per second."),
    "gpufleet_gpus": ("gauge", "GPUs nvidia-smi lists on the node (watch)."),
    "gpufleet_gpu_pcie_link_width": ("gauge", "The GPU's PCIe link width in lanes (current, max)."),
    "gpufleet_gpu_row_remap_pending": ("gauge", "1 while the GPU has a row remap waiting for a GPU reset."),
    "gpufleet_gpu_pcie_replays": ("gauge", "PCIe replays of the GPU's link in the watch window."),
    "gpufleet_gpu_recovery_action": (
        "gauge",
        "1 while the driver's GPU Recovery Action (the action label) asks for one; 0 with action None.",
    ),
    "gpufleet_gpu_ecc_uncorrectable_errors": (
        "gauge",
        "Uncorrectable ECC errors of the GPU (volatile: since the driver loaded; aggregate: lifetime).",
    ),
    "gpufleet_gpu_nvlink_links_active": ("gauge", "The GPU's active NVLink links."),
    "gpufleet_gpu_xid_events": ("gauge", "Xid events of a GPU (by PCI bus id) in the kernel log since boot."),
    "gpufleet_gpu_fabric_unhealthy": (
        "gauge",
        "1 while the GPU's NVSwitch fabric registration (state, status labels) is not Completed/Success, 0 "
        "when it is; absent on a GPU on no NVSwitch fabric.",
    ),
    "gpufleet_gpu_nvlink_errors_per_minute": (
        "gauge",
        "The GPU's NVLink errors a minute over the watch window, summed over its links (kind: crc, replay, "
        "recovery).",
    ),
    "gpufleet_nvswitch_sxid_events": (
        "gauge",
        "SXid lines of an NVSwitch (by PCI bus id) in the kernel log since boot, with the severity its first "
        "line says (fatal, non-fatal; unknown when none says).",
    ),
    "gpufleet_nvidia_peermem_loaded": (
        "gauge",
        "1 while the nvidia_peermem module (GPUDirect RDMA) is loaded; absent where it is not judged.",
    ),
    "gpufleet_pcie_acs_enabled": (
        "gauge",
        "1 while ACS redirects peer-to-peer traffic at a PCIe switch port (by bridge address).",
    ),
    "gpufleet_rdma_firmware_errors": (
        "gauge",
        "mlx5_core firmware error lines of the RDMA device in the kernel log since boot.",
    ),
    "gpufleet_rdma_link_up": ("gauge", "1 when the RoCE port's link was up at the end of the watch window."),
    "gpufleet_rdma_link_speed_bytes": ("gauge", "The RoCE port's link rate in bytes per second, while up."),
    "gpufleet_rdma_link_down_events": ("gauge", "Link-down events of the RoCE port in the watch window."),
    "gpufleet_rdma_symbol_errors_per_minute": (
        "gauge",
        "Uncorrected symbol errors a minute on the RoCE port's physical layer (watch window).",
    ),
    "gpufleet_rdma_phy_errors": (
        "gauge",
        "Link integrity errors and excessive buffer overruns of the RoCE port in the watch window, by kind.",
    ),
    "gpufleet_vllm_up": ("gauge", "1 when the vLLM instance answered its metrics endpoint."),
    "gpufleet_vllm_prefix_cache_hit_ratio": ("gauge", "vLLM prefix cache hit ratio over the watch window."),
    "gpufleet_vllm_generation_tokens_per_second": ("gauge", "vLLM generated tokens per second."),
    "gpufleet_vllm_requests": ("gauge", "vLLM requests per state (running, waiting)."),
    "gpufleet_vllm_preemptions_per_second": ("gauge", "vLLM request preemptions per second."),
    "gpufleet_vllm_kv_cache_usage_ratio": ("gauge", "Share of vLLM's KV cache in use."),
}

# Runs whose changes are settings still to change (nothing was changed).
_DRIFT_COMMANDS = ("drift", "check")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


@dataclass
class Samples:
    """Series per metric; a label set given twice keeps the last value (one series each)."""

    series: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def add(self, metric: str, labels: dict[str, Any], value: Any) -> None:
        if metric not in METRICS:  # a typo would drop the series silently
            raise KeyError(f"{metric} is not one of prom.METRICS")
        number = _number(value)
        if number is None:  # not read: no series rather than a made-up value
            return
        key = tuple((k, str(v)) for k, v in labels.items())
        self.series.setdefault(metric, {})[key] = number


def command_word(report: Report) -> str:
    """The report's command without its options: ``provision --check`` -> ``provision``."""
    return (report.command.split() or ["unknown"])[0]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _gpu_labels(base: dict[str, str], gpu: dict[str, Any], position: int) -> dict[str, Any]:
    """gpu="<index>" and its uuid, as DCGM's exporter labels a GPU."""
    index = gpu.get("index")
    return {**base, "gpu": index if isinstance(index, int) else position, "uuid": gpu.get("uuid") or ""}


def _group(name: str) -> str:
    """The area of a check or the role of a setting: its name before the first "."."""
    head = name.split(".", 1)[0]
    if _IDENTIFIER.fullmatch(head):
        return head
    # switch_qos names its settings by NVUE path (qos/pfc/default-global/...).
    return "switch_qos" if "/" in name else "other"


def _host_series(out: Samples, report: Report, host: str, command: str, drift_run: bool) -> None:
    result = report.hosts[host]
    base = {"host": host, "command": command}
    for status in STATUSES:
        out.add("gpufleet_host_status", {**base, "status": status}, result.status == status)
    failed: dict[str, int] = {}
    for c in one_per_condition(result.checks):
        area = _group(c["name"])
        failed[area] = failed.get(area, 0) + (not c["ok"])
    for area in sorted(failed):
        out.add("gpufleet_failed_checks", {**base, "area": area}, failed[area])
    # Unreachable, or stopped before it was read: how far it drifted is not known.
    known = result.status != "unreachable" and (result.status != "interrupted" or result.changes)
    if drift_run and known:
        # drift --fix: a changed host had its drift fixed; the others keep theirs.
        changes = [] if result.status == "changed" else result.changes
        roles: dict[str, int] = {}
        for ch in changes:
            role = _group(ch["setting"])
            roles[role] = roles.get(role, 0) + 1
        out.add("gpufleet_drifted_settings", {**base, "role": "all"}, len(changes))
        for role in sorted(roles):
            out.add("gpufleet_drifted_settings", {**base, "role": role}, roles[role])


def _gpu_series(out: Samples, base: dict[str, str], facts: dict[str, Any]) -> None:
    """Power limits from the GPU facts, then the watch's readings (the later reading wins)."""
    for i, gpu in enumerate(_list(facts.get("gpufleet_gpus"))):
        gpu = _dict(gpu)
        labels = _gpu_labels(base, gpu, i)
        power = _dict(gpu.get("power"))
        for kind in ("enforced", "requested"):
            out.add("gpufleet_gpu_power_limit_watts", {**labels, "kind": kind}, power.get(f"{kind}_limit_w"))
    for i, gpu in enumerate(_list(_dict(facts.get("gpufleet_watch")).get("gpus"))):
        gpu = _dict(gpu)
        labels = _gpu_labels(base, gpu, i)
        for kind, watts in sorted(_dict(gpu.get("power_limit_w")).items()):
            out.add("gpufleet_gpu_power_limit_watts", {**labels, "kind": kind}, watts)
        out.add("gpufleet_gpu_power_draw_watts", labels, gpu.get("power_draw_w"))
        for sensor, celsius in sorted(_dict(gpu.get("temperature_c")).items()):
            out.add("gpufleet_gpu_temperature_celsius", {**labels, "sensor": sensor}, celsius)
        out.add("gpufleet_gpu_tlimit_margin_celsius", labels, gpu.get("tlimit_c"))
        for reason, active in sorted(_dict(gpu.get("throttle_active")).items()):
            out.add("gpufleet_gpu_throttle_active", {**labels, "reason": reason}, active)
        for reason, seconds in sorted(_dict(gpu.get("throttle_seconds_total")).items()):
            out.add("gpufleet_gpu_throttle_seconds_total", {**labels, "reason": reason}, seconds)


_PORT_RATES = ("retransmits", "rx_discards", "cnp_sent", "ecn_marked")
_VLLM_GAUGES = (
    "prefix_cache_hit_ratio",
    "generation_tokens_per_second",
    "preemptions_per_second",
    "kv_cache_usage_ratio",
)


def _health_series(out: Samples, base: dict[str, str], health: dict[str, Any]) -> None:
    """The watch's hardware health reading (node_health.fact)."""
    if not health:
        return
    out.add("gpufleet_gpus", base, health.get("gpu_count"))
    for i, gpu in enumerate(_list(health.get("gpus"))):
        gpu = _dict(gpu)
        labels = _gpu_labels(base, gpu, i)
        out.add("gpufleet_gpu_pcie_link_width", {**labels, "kind": "current"}, gpu.get("pcie_width"))
        out.add("gpufleet_gpu_pcie_link_width", {**labels, "kind": "max"}, gpu.get("pcie_width_max"))
        out.add("gpufleet_gpu_row_remap_pending", labels, gpu.get("row_remap_pending"))
        out.add("gpufleet_gpu_pcie_replays", labels, gpu.get("pcie_replays_window"))
        action = gpu.get("recovery_action")
        if isinstance(action, str):  # not reported by the driver: no series
            out.add("gpufleet_gpu_recovery_action", {**labels, "action": action}, action != "None")
        for scope in ("volatile", "aggregate"):
            errors = gpu.get(f"ecc_uncorrectable_{scope}")
            out.add("gpufleet_gpu_ecc_uncorrectable_errors", {**labels, "scope": scope}, errors)
        out.add("gpufleet_gpu_nvlink_links_active", labels, gpu.get("nvlink_active"))
        state = gpu.get("fabric_state")
        if isinstance(state, str):  # a GPU on no NVSwitch fabric: no series
            status = gpu.get("fabric_status") or "N/A"
            unhealthy = (state, status) != ("Completed", "Success")
            out.add("gpufleet_gpu_fabric_unhealthy", {**labels, "state": state, "status": status}, unhealthy)
        for kind, rate in sorted(_dict(gpu.get("nvlink_errors_per_minute")).items()):
            out.add("gpufleet_gpu_nvlink_errors_per_minute", {**labels, "kind": kind}, rate)
    for event in _list(health.get("xids")):
        event = _dict(event)
        labels = {**base, "pci_bus_id": event.get("pci_bus_id") or "", "xid": event.get("xid")}
        out.add("gpufleet_gpu_xid_events", labels, event.get("events"))
    for event in _list(health.get("sxids")):
        event = _dict(event)
        labels = {
            **base,
            "pci_bus_id": event.get("pci_bus_id") or "",
            "device": event.get("device") or "",
            "sxid": event.get("sxid"),
            "sxid_severity": event.get("severity") or "unknown",
        }
        out.add("gpufleet_nvswitch_sxid_events", labels, event.get("events"))
    gpudirect = _dict(health.get("gpudirect"))
    out.add("gpufleet_nvidia_peermem_loaded", base, gpudirect.get("peermem_loaded"))
    for bridge, enabled in sorted(_dict(gpudirect.get("acs_enabled")).items()):
        out.add("gpufleet_pcie_acs_enabled", {**base, "bridge": bridge}, enabled)
    for port, lines in sorted(_dict(health.get("nic_firmware_errors")).items()):
        out.add("gpufleet_rdma_firmware_errors", {**base, "port": port}, lines)


def _watch_series(out: Samples, base: dict[str, str], watch: dict[str, Any]) -> None:
    for port in _list(watch.get("ports")):
        port = _dict(port)
        labels = {**base, "port": port.get("ibdev") or ""}
        for rate in _PORT_RATES:
            out.add(f"gpufleet_rdma_{rate}_per_second", labels, port.get(f"{rate}_per_second"))
        out.add("gpufleet_rdma_link_up", labels, port.get("link_up"))
        gbps = _number(port.get("rate_gbps"))
        out.add("gpufleet_rdma_link_speed_bytes", labels, None if gbps is None else gbps * 1e9 / 8)
        out.add("gpufleet_rdma_link_down_events", labels, port.get("link_down_events"))
        out.add("gpufleet_rdma_symbol_errors_per_minute", labels, port.get("symbol_errors_per_minute"))
        for kind, count in sorted(_dict(port.get("phy_errors")).items()):
            out.add("gpufleet_rdma_phy_errors", {**labels, "kind": kind}, count)
        for priority, share in sorted(_dict(port.get("pause_seconds_per_second")).items()):
            out.add("gpufleet_rdma_pause_seconds_per_second", {**labels, "priority": priority}, share)
    _health_series(out, base, _dict(watch.get("health")))
    for instance in _list(watch.get("instances")):
        instance = _dict(instance)
        # Not "instance": Prometheus gives that label to the scrape target (node_exporter).
        labels = {**base, "vllm_instance": instance.get("name") or ""}
        out.add("gpufleet_vllm_up", labels, instance.get("up"))
        for state in ("running", "waiting"):
            out.add("gpufleet_vllm_requests", {**labels, "state": state}, instance.get(f"requests_{state}"))
        for gauge in _VLLM_GAUGES:
            out.add(f"gpufleet_vllm_{gauge}", labels, instance.get(gauge))


def _unsafe_series(out: Samples, base: dict[str, str], found: list[dict[str, Any]]) -> None:
    """Whether the watch found the node unsafe to serve (quarantine.UNSAFE), and in which classes: no alert
    of its own reads them (each cause has its alert), they are for dashboards and a router's health."""
    classes = quarantine.unsafe_classes(found)
    out.add("gpufleet_node_unsafe", base, bool(classes))
    for name in classes:
        out.add("gpufleet_node_unsafe_class", {**base, "class": name}, True)


# A node's guardian decision (report.HostReport.guardian) -> the series that says what gpufleet holds it as.
_HELD = {
    "quarantined": "gpufleet_node_quarantined",
    "kept_out": "gpufleet_node_quarantined",
    "replace_hardware": "gpufleet_node_replace_hardware",
    "would_quarantine": "gpufleet_node_would_quarantine",
}
_REMEDIATIONS = ("gpu_reset", "reboot")
# History events (the node's remediation history, docs/guardian.md) that end a quarantine or a replace.
_QUARANTINE_ENDS = ("gate_passed", "cleared")


def _still_held(history: list[Any]) -> tuple[str, list[str]]:
    """From a drained node's own history: ("gpufleet_node_replace_hardware", classes) while its latest
    replace_hardware has no later cleared, ("gpufleet_node_quarantined", classes) while its latest
    quarantine has no later gate_passed or cleared, else ("", [])."""
    events = [e for e in history if isinstance(e, dict)]
    for metric, opening, ends in (
        ("gpufleet_node_replace_hardware", "replace_hardware", ("cleared",)),
        ("gpufleet_node_quarantined", "quarantine", _QUARANTINE_ENDS),
    ):
        classes: list[str] = []
        for event in events:
            if event.get("action") in ends:
                classes = []
            elif event.get("action") == opening and isinstance(event.get("class"), str):
                classes.append(event["class"])
        if classes:
            return metric, list(dict.fromkeys(classes))
    return "", []


def _guardian_host_series(
    out: Samples, base: dict[str, str], guardian: dict[str, Any], check: bool, history: list[Any]
) -> None:
    """What a watch that acts decided for the node: held out (and for which classes), would have taken
    out, to replace; and each remediation with its outcome."""
    decision = guardian.get("decision")
    classes = list(_dict(guardian.get("classes")))
    metric = _HELD.get(str(decision), "")
    if check and metric:
        metric = "gpufleet_node_would_quarantine"  # a --check run took nothing out, escalated nothing
    elif decision == "left_alone":
        metric, held = _still_held(history)
        classes = held or classes
    if metric:
        for name in classes or ["unknown"]:
            out.add(metric, {**base, "class": name}, True)
    steps = [_dict(step) for step in _list(guardian.get("steps"))]
    for i, step in enumerate(steps):
        outcome = step.get("outcome")
        if step.get("step") not in _REMEDIATIONS or not isinstance(outcome, str):
            continue
        # a run stopped after it (a "stopped" step follows): its end was never confirmed
        if outcome == "ok" and any(later.get("step") == "stopped" for later in steps[i + 1 :]):
            outcome = "stopped"
        out.add("gpufleet_node_remediation", {**base, "action": step["step"], "outcome": outcome}, True)


def _guardian_series(out: Samples, command: str, guardian: dict[str, Any]) -> None:
    """The run's circuit breaker and the leaves that explain failures."""
    breaker = _dict(guardian.get("breaker"))
    if breaker:
        out.add("gpufleet_guardian_breaker_open", {"command": command}, bool(breaker.get("open")))
        out.add("gpufleet_guardian_breaker_used", {"command": command}, breaker.get("used"))
        out.add("gpufleet_guardian_breaker_limit", {"command": command}, breaker.get("limit"))
    for leaf in sorted(_dict(guardian.get("leaves"))):
        out.add("gpufleet_leaf_explains_failures", {"command": command, "leaf": leaf}, True)


def collect(report: Report) -> Samples:
    """Every series of the report's textfile."""
    out = Samples()
    command = command_word(report)
    words = report.command.split()
    drift_run = command in _DRIFT_COMMANDS or "--check" in words
    for host in sorted(report.hosts):
        _host_series(out, report, host, command, drift_run)
        base = {"host": host, "command": command}
        facts = report.hosts[host].facts
        _gpu_series(out, base, facts)
        _watch_series(out, base, _dict(facts.get("gpufleet_watch")))
        if command == "watch":
            _unsafe_series(out, base, report.hosts[host].checks)
        if report.hosts[host].guardian:
            history = _list(_dict(facts.get("gpufleet_watch")).get("history"))
            check = bool(report.guardian.get("check"))
            _guardian_host_series(out, base, report.hosts[host].guardian, check, history)
    _guardian_series(out, command, report.guardian)
    out.add("gpufleet_last_run_timestamp_seconds", {"command": command}, finished_timestamp(report))
    summary = report.summary()
    for status in STATUSES:
        out.add("gpufleet_last_run_hosts", {"command": command, "status": status}, summary[status])
    out.add("gpufleet_last_run_interrupted", {"command": command}, bool(report.interrupted))
    return out


def _label(value: str) -> str:
    """A label value in the text format: control characters written out (a host name or port from a
    node must not reach whoever reads the file raw), then the format's own three escapes."""
    return printable(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(number: float) -> str:
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def _lines(samples: Samples) -> Iterable[str]:
    for metric, (kind, text) in METRICS.items():
        series = samples.series.get(metric)
        if not series:
            continue
        yield f"# HELP {metric} {text}"
        yield f"# TYPE {metric} {kind}"
        for labels, number in series.items():
            inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels)
            yield f"{metric}{{{inner}}} {_value(number)}"


def render(report: Report) -> str:
    """The textfile: node_exporter's text format, HELP and TYPE before each metric's series."""
    return "\n".join(_lines(collect(report))) + "\n"


def textfile_name(report: Report) -> str:
    word = re.sub(r"[^a-z0-9_]", "_", command_word(report).lower())
    return f"gpufleet_{word}.prom"


def write_textfile(report: Report, directory: Path) -> Path:
    """Writes gpufleet_<command>.prom into a textfile collector directory, atomically.

    The directory must exist (one that does not is a typo node_exporter would never read). The
    file is written beside its target as a hidden .tmp, which the collector (reading *.prom) skips,
    then renamed over it (atomic_file); world-readable, for node_exporter runs as its own user.
    """
    path = directory / textfile_name(report)
    atomic_file.replace(path, render(report))
    return path
