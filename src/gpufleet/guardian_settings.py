"""A watch that acts (issue 39): the guardian's settings per node, read from the inventory and refused
before anything changes.

Each node's settings come from its host variables as ``ansible-inventory --list`` gives them
(``preflight.read_inventory``'s ``_meta.hostvars[node]``: the host's own, its groups', group_vars/all),
so a rack can opt into a reboot that another may not. Every setting has a default (the guardian then
quarantines only: no remediation, escalation and breaker as below) and a range; a value outside it is a
configuration error (the CLI's exit 2) that names the setting, the node, the value and what is allowed,
every refusal of the inventory at once.

The breaker's three settings judge the fleet, not a node: they must be the same on every node (set them
in group_vars/all); ``fleet_breaker`` refuses nodes that differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet import preflight, quarantine

GPU_RESET = "gpu_reset"
REBOOT = "reboot"
REMEDIATIONS = (GPU_RESET, REBOOT)

# The classes a GPU reset (nvidia-smi -r) may be configured for: what NVIDIA says a reset clears.
# - row_remap: "Row-remapping pending flag: This flag indicates that row-remapping will happen at the
#   next GPU reset" (NVIDIA, A100 GPU memory error management, "Error Recovery and Response Flags",
#   https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html). A
#   row remap *failure* is an RMA (same page, "RMA Policy Thresholds"): escalation sends it straight to
#   replace_hardware, never to a reset.
# - recovery_action: the same page's recovery action flag "Reset (NVML_GPU_RECOVERY_ACTION_GPU_RESET):
#   ... reset the GPU using nvidia-smi -r, and the GPU can be used again"; a "Reboot"
#   (NVML_GPU_RECOVERY_ACTION_NODE_REBOOT) asks for the node's reboot: configure reboot for the class
#   where the fleet's GPUs ask for that (the gate after the reset still finds a reboot-class action).
# - ecc_uncorrectable: on A100 and later an uncorrectable error marks its row for remapping (the same
#   page's "Recovery action flag will be triggered for uncorrectable errors"), which the next reset applies.
# - xid: the Xid catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) gives each
#   Xid a "Resolution Bucket (Immediate Action)"; most blocking Xids are RESET_GPU (46, 62, 109, 136, 143,
#   156, 158, ... as plugins/module_utils/gpu/xid.py transcribes it) and Xid 48's WORKFLOW_XID_48 is "reset
#   the GPU or reboot the node so the row is remapped". One of another bucket (RESTART_BM, CONTACT_SUPPORT)
#   still fails the gate after the reset and stays out; Xid 64 (RESET_GPU, but a remap that could not be
#   recorded) goes straight to replace_hardware (guardian_escalation).
# Every other class (a GPU lost, NVLink or its fabric, a RoCE port, thermal, coolant) is not a GPU's
# state a reset clears: reboot, or quarantine only.
GPU_RESET_CLASSES = ("row_remap", "xid", "recovery_action", "ecc_uncorrectable")
UNSAFE_NAMES = tuple(cls.name for cls in quarantine.UNSAFE)


@dataclass(frozen=True)
class Bounded:
    """An integer setting: its inventory name, default and allowed range (both ends included)."""

    name: str
    default: int
    low: int
    high: int


@dataclass(frozen=True)
class BreakerSettings:
    """The circuit breaker's settings, one set for the fleet."""

    max_nodes: int = 2
    max_percent: float = 10.0
    window_min: int = 60


@dataclass(frozen=True)
class GuardianSettings:
    """One node's guardian settings (the defaults: quarantine only, escalation and breaker as below).
    ``remediation`` is read-only by convention (class -> ``gpu_reset`` | ``reboot``)."""

    remediation: Mapping[str, str] = field(default_factory=dict)
    escalate_after: int = 2
    escalate_window_h: int = 168
    breaker_max_nodes: int = 2
    breaker_max_percent: float = 10.0
    breaker_window_min: int = 60
    reboot_graceful_timeout_s: int = 300
    reboot_boot_timeout_s: int = 900

    @property
    def breaker(self) -> BreakerSettings:
        return BreakerSettings(self.breaker_max_nodes, self.breaker_max_percent, self.breaker_window_min)

    def remediation_for(self, cls: str) -> str:
        """The remediation configured for a class, "" when none (quarantine only)."""
        return self.remediation.get(cls, "")


REMEDIATION = "guardian_remediation"
# The defaults' sources: 2 remediations of one class in 7 days is NVSentinel's repeat-offender
# escalation (a 7-day window); gpud marks a node for hardware inspection after two reboots. The breaker's
# 2 nodes or 10 % per hour is the (NVSentinel's own is 50 % in 5 minutes: too many for a serving
# fleet whose every node holds requests). The reboot timeouts are issue 39's (graceful for 5 minutes,
# then forced; SSH back within 15).
ESCALATE_AFTER = Bounded("guardian_escalate_after", 2, 1, 10)
ESCALATE_WINDOW_H = Bounded("guardian_escalate_window_h", 168, 1, 2160)
BREAKER_MAX_NODES = Bounded("guardian_breaker_max_nodes", 2, 0, 100000)
BREAKER_WINDOW_MIN = Bounded("guardian_breaker_window_min", 60, 1, 10080)
REBOOT_GRACEFUL_TIMEOUT_S = Bounded("guardian_reboot_graceful_timeout_s", 300, 10, 3600)
REBOOT_BOOT_TIMEOUT_S = Bounded("guardian_reboot_boot_timeout_s", 900, 60, 7200)
BREAKER_MAX_PERCENT = "guardian_breaker_max_percent"
BREAKER_MAX_PERCENT_DEFAULT = 10.0
BREAKER_MAX_PERCENT_RANGE = (0.0, 100.0)

INTEGERS = (
    ESCALATE_AFTER,
    ESCALATE_WINDOW_H,
    BREAKER_MAX_NODES,
    BREAKER_WINDOW_MIN,
    REBOOT_GRACEFUL_TIMEOUT_S,
    REBOOT_BOOT_TIMEOUT_S,
)
# every setting this module reads, for docs and tests
SETTINGS = (REMEDIATION, *(b.name for b in INTEGERS), BREAKER_MAX_PERCENT)


class SettingsError(preflight.ConfigError):
    """The inventory's guardian settings refused (exit 2): ``problems`` holds each refusal."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        super().__init__(f"guardian settings: {shown}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _integer(value: Any) -> int | None:
    """An integer the inventory gave (a YAML int, or an INI inventory's digits), else None; never a bool."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            found = float(value.strip())
        except ValueError:
            return None
        return found if math.isfinite(found) else None
    return None


_TEMPLATE_HINT = "a Jinja template is not rendered for the guardian's settings (the controller reads them "
_TEMPLATE_HINT += "before any play): give the value"


def _remediation(value: Any, problems: list[tuple[str, str, str]]) -> dict[str, str]:
    """guardian_remediation checked: (setting, value, what is allowed) for each refusal."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(
            (REMEDIATION, _shown(value), f"a mapping of failure class to {' or '.join(REMEDIATIONS)}")
        )
        return {}
    found: dict[str, str] = {}
    for cls, action in sorted(value.items(), key=lambda item: str(item[0])):
        setting = f"{REMEDIATION}[{cls}]"
        if cls not in UNSAFE_NAMES:
            problems.append(
                (
                    f"{REMEDIATION} key",
                    _shown(cls),
                    f"one of the unsafe failure classes: {', '.join(UNSAFE_NAMES)}",
                )
            )
        elif action not in REMEDIATIONS:
            problems.append((setting, _shown(action), f"{' or '.join(REMEDIATIONS)}"))
        elif action == GPU_RESET and cls not in GPU_RESET_CLASSES:
            problems.append(
                (
                    setting,
                    _shown(action),
                    f"reboot: a GPU reset clears only {', '.join(GPU_RESET_CLASSES)} (NVIDIA's catalog)",
                )
            )
        else:
            found[str(cls)] = str(action)
    return found


def settings_of(hostvars: Mapping[str, Any]) -> tuple[GuardianSettings, list[tuple[str, str, str]]]:
    """One node's settings from its host variables, and each refusal (setting, value, allowed): the
    settings hold the defaults where a value was refused."""
    problems: list[tuple[str, str, str]] = []
    remediation = _remediation(hostvars.get(REMEDIATION), problems)
    integers: dict[str, int] = {}
    for bounded in INTEGERS:
        raw = hostvars.get(bounded.name)
        if raw is None:
            integers[bounded.name] = bounded.default
            continue
        allowed = f"an integer {bounded.low}..{bounded.high} (default {bounded.default})"
        value = _integer(raw)
        if value is None or not bounded.low <= value <= bounded.high:
            hint = f"{allowed}; {_TEMPLATE_HINT}" if _templated(raw) else allowed
            problems.append((bounded.name, _shown(raw), hint))
            integers[bounded.name] = bounded.default
        else:
            integers[bounded.name] = value
    raw_percent = hostvars.get(BREAKER_MAX_PERCENT)
    percent = BREAKER_MAX_PERCENT_DEFAULT
    if raw_percent is not None:
        low, high = BREAKER_MAX_PERCENT_RANGE
        number = _number(raw_percent)
        if number is None or not low <= number <= high:
            allowed = f"a number {low:g}..{high:g} (default {BREAKER_MAX_PERCENT_DEFAULT:g})"
            hint = f"{allowed}; {_TEMPLATE_HINT}" if _templated(raw_percent) else allowed
            problems.append((BREAKER_MAX_PERCENT, _shown(raw_percent), hint))
        else:
            percent = number
    settings = GuardianSettings(
        remediation=remediation,
        escalate_after=integers[ESCALATE_AFTER.name],
        escalate_window_h=integers[ESCALATE_WINDOW_H.name],
        breaker_max_nodes=integers[BREAKER_MAX_NODES.name],
        breaker_max_percent=percent,
        breaker_window_min=integers[BREAKER_WINDOW_MIN.name],
        reboot_graceful_timeout_s=integers[REBOOT_GRACEFUL_TIMEOUT_S.name],
        reboot_boot_timeout_s=integers[REBOOT_BOOT_TIMEOUT_S.name],
    )
    return settings, problems


def _nodes(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def settings_for(hostvars: Mapping[str, Mapping[str, Any]]) -> dict[str, GuardianSettings]:
    """Every node's settings (``hostvars``: node -> its host variables, e.g. the ``_meta.hostvars`` of
    ``preflight.read_inventory``, the GPU nodes only). SettingsError (a preflight.ConfigError: exit 2)
    names every refusal at once: the setting, the nodes (one refusal shared by many nodes, as a value in
    group_vars/all is, is said once), the value and what is allowed."""
    found: dict[str, GuardianSettings] = {}
    refused: dict[tuple[str, str, str], list[str]] = {}
    for node in sorted(hostvars):
        own = hostvars[node]
        settings, problems = settings_of(own if isinstance(own, Mapping) else {})
        found[node] = settings
        for problem in problems:
            refused.setdefault(problem, []).append(node)
    if refused:
        raise SettingsError(
            [
                f"{setting} is {value} on {_nodes(nodes)}: allowed {allowed}"
                for (setting, value, allowed), nodes in refused.items()
            ]
        )
    return found


def fleet_breaker(settings: Mapping[str, GuardianSettings]) -> BreakerSettings:
    """The one set of breaker settings of the fleet (every node's, which must agree: the breaker counts
    the fleet's quarantines); SettingsError naming the nodes of each value when they differ. No node:
    the defaults."""
    by_value: dict[BreakerSettings, list[str]] = {}
    for node in sorted(settings):
        by_value.setdefault(settings[node].breaker, []).append(node)
    if len(by_value) > 1:
        shown = "; ".join(
            f"max_nodes {b.max_nodes}, max_percent {b.max_percent:g}, window_min {b.window_min} on "
            f"{_nodes(nodes)}"
            for b, nodes in by_value.items()
        )
        raise SettingsError(
            [
                "guardian_breaker_max_nodes, guardian_breaker_max_percent and guardian_breaker_window_min "
                f"differ between nodes ({shown}): the breaker counts the whole fleet's quarantines, so "
                "set them once for every node (group_vars/all)"
            ]
        )
    return next(iter(by_value), BreakerSettings())
