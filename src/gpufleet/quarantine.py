"""Which failed checks make a serving node unsafe to serve.

The watch judges a node in service; this module says what that verdict means for the fleet (issue 39):

- a failure of an UNSAFE class (a GPU gone, a blocking Xid or recovery action, uncorrectable ECC, a row
  remap pending or failed, NVLink or its fabric down, a RoCE port down, a GPU past its temperature limits,
  the coolant loop beyond the gate's limits or leaking) makes the node one to take out of service at
  once: its requests would fail or corrupt;
- any other failure (a power cap from the PDU, a prefix-cache cliff, RoCE counters rising, a slow link, a
  NIC firmware error line) is reported and alerted, never a reason to take a node out: the node still
  answers correctly, and the cause is often outside it (the PDU, a prompt template, the leaf).

Pure functions over a report's checks. `gpufleet watch` names each unsafe node with its classes (its
message, and the Prometheus series ``gpufleet_node_unsafe`` and ``gpufleet_node_unsafe_class``),
read-only: the nodes a watch that acts would take out. Acting on it (drain, stop, remediate, a circuit
breaker) builds on this one classification.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FailureClass:
    """A kind of failure that makes a node unsafe to serve: the check families that show it."""

    name: str
    families: tuple[str, ...]
    why: str


# In the order a person reads a node's causes: the most certain loss of service first.
UNSAFE: tuple[FailureClass, ...] = (
    FailureClass("gpu_lost", ("health.gpu_count",), "a GPU is missing from the node"),
    FailureClass("xid", ("health.xid",), "the driver logged an Xid that needs a reset or more"),
    FailureClass(
        "recovery_action", ("health.recovery_action",), "the driver asks for a GPU reset or a reboot"
    ),
    FailureClass(
        "ecc_uncorrectable",
        ("health.ecc_uncorrectable", "health.ecc_uncorrectable_aggregate"),
        "GPU memory returned uncorrectable errors",
    ),
    FailureClass(
        "row_remap",
        ("health.row_remap_pending", "health.row_remap_failure"),
        "a GPU memory row remap is pending or failed",
    ),
    FailureClass(
        "nvlink",
        ("health.nvlink", "health.fabric_manager", "health.sxid"),
        "NVLink or its fabric is down: tensor parallelism across the GPUs breaks",
    ),
    FailureClass("roce_port_down", ("rdma_link.link_state",), "a RoCE port is down"),
    FailureClass(
        "thermal",
        ("thermal.gpu_temp_c", "thermal.memory_temp_c", "thermal.hotspot_c", "thermal.tlimit_c"),
        "a GPU is past its temperature limits",
    ),
    FailureClass(
        "coolant",
        (
            "coolant.flow_lpm",
            "coolant.leak",
            "coolant.cdu_leak",
            "coolant.supply_temp_c",
            "coolant.delta_temp_c",
        ),
        "the coolant loop is beyond the gate's limits or leaking",
    ),
)

_CLASS_OF = {family: cls for cls in UNSAFE for family in cls.families}
_BY_NAME = {cls.name: cls for cls in UNSAFE}


def family(check_name: str) -> str:
    """``health.xid[0000:1b:00.0]`` -> ``health.xid``."""
    return check_name.split("[", 1)[0]


def unsafe_classes(checks: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The unsafe classes among a node's failed checks: class name -> the failed check names, in UNSAFE's
    order (empty when nothing failed that makes the node unsafe)."""
    found: dict[str, list[str]] = {}
    for c in checks:
        if c.get("ok"):
            continue
        cls = _CLASS_OF.get(family(str(c.get("name", ""))))
        if cls is not None:
            found.setdefault(cls.name, []).append(str(c["name"]))
    order = [cls.name for cls in UNSAFE]
    return {name: found[name] for name in sorted(found, key=order.index)}


def describe(classes: Mapping[str, list[str]]) -> str:
    """``unsafe_classes``' result in words: "a GPU is missing from the node; a RoCE port is down"."""
    return "; ".join(_BY_NAME[name].why for name in classes)
