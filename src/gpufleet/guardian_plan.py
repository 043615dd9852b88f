"""A watch that acts (issue 39): what the guardian decides for each node, from the watch's findings, pure.

Per node, in this order:

- ``left_alone``: already out of service, so not acted on again: the drain role's record is on the node
  (gpufleet's: a gate that blocked it, an earlier quarantine), the scheduler shows it drained (a person's
  reason, or gpufleet's), or its history holds a ``replace_hardware`` with no later ``cleared`` (or the
  watch's ``guardian.replace_hardware`` check fails with that mark);
- ``none``: no failed check of an unsafe class (quarantine.unsafe_classes): nothing to do;
- ``fabric``: its only unsafe failures are RoCE ports down (class roce_port_down), and every such port is
  cabled (its ``fabric_cabling``) to a leaf the run found bad (``leaf_verdicts``: the leaf down, or without
  PFC or ECN): the leaf is named, the node is not quarantined (draining every node behind a leaf would
  take out the leaf's whole rack for the switch's fault);
- ``quarantine``: taken out of service with the drain reason that names its failed checks
  (drain_state.drain_reason, ``gpufleet watch: health.xid[...] 79 +1 more``), then either
  ``replace_hardware`` (guardian_escalation: no remediation, it stays out until ``gpufleet release``) or the
  remediation configured for the first of its classes (in quarantine.UNSAFE's order) that has one
  (``gpu_reset`` | ``reboot``; none: quarantine only; none either when its history could not be read:
  ``guardian.replace_hardware`` "unread", whether it is a repeat offender is unknown);
- ``would_quarantine``: the same, but the circuit breaker is open or this quarantine would pass its limit
  (guardian_breaker): nothing changes on the node.

The breaker admits the fleet's candidates in one stable order: the most certain loss first (the first of
a node's classes in quarantine.UNSAFE's order: a GPU lost before an Xid before ... coolant), then by name;
the first refused opens the breaker and every later one is would_quarantine too.

:func:`plan` also gives the breaker's state after the run (its quarantines recorded, opened if one was
refused): the guardian saves it BEFORE the playbook that drains them runs (a killed run has still
counted them), and never in ``--check``.
"""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gpufleet import guardian_breaker, quarantine, runner
from gpufleet.guardian_breaker import BreakerState
from gpufleet.guardian_escalation import escalate_node, pending_replace
from gpufleet.guardian_settings import GuardianSettings, fleet_breaker

NONE, LEFT_ALONE, FABRIC = "none", "left_alone", "fabric"
QUARANTINE, WOULD_QUARANTINE = "quarantine", "would_quarantine"
DECISIONS = (NONE, LEFT_ALONE, FABRIC, QUARANTINE, WOULD_QUARANTINE)
# what the drain reason says gpufleet is doing: "gpufleet watch: <failed checks>"
WHAT = "watch"
ROCE_PORT_DOWN = "roce_port_down"
# node_health's (gate and watch) judge of the history's replace-hardware mark
# (module_utils/node/remediation_history.replace_hardware_check): failed with the class as its value while
# marked, with "unread" when the history could not be read.
MARK_CHECK = "guardian.replace_hardware"
UNREAD = "unread"
_DRAIN_STATE = "ansible_collections.gpufleet.node.plugins.module_utils.node.drain_state"
_ORDER = [cls.name for cls in quarantine.UNSAFE]


@dataclass(frozen=True)
class Decision:
    """What the guardian decided for one node: the fields HostReport.guardian holds before its steps."""

    decision: str
    # unsafe class -> its failed checks, in quarantine.UNSAFE's order
    classes: Mapping[str, list[str]] = field(default_factory=dict)
    # the drain reason (quarantine, would_quarantine)
    reason: str = ""
    # gpu_reset | reboot | "" (none configured, or replace_hardware)
    remediation: str = ""
    replace_hardware: bool = False
    # the bad leaf (fabric), several joined with ", "
    leaf: str = ""
    # one line
    why: str = ""

    def as_guardian(self) -> dict[str, Any]:
        """HostReport.guardian's fields for this decision, without ``steps`` ({} for none). A quarantine
        reads "quarantined" (or "replace_hardware"); the guardian replaces it with "returned" or "kept_out"
        once the gate has judged the node."""
        if self.decision == NONE:
            return {}
        shown = self.decision
        if self.decision == QUARANTINE:
            shown = "replace_hardware" if self.replace_hardware else "quarantined"
        found: dict[str, Any] = {
            "decision": shown,
            "classes": {k: list(v) for k, v in self.classes.items()},
            "reason": self.reason,
            "remediation": self.remediation,
            "why": self.why,
        }
        if self.decision == FABRIC:
            found["leaf"] = self.leaf
        return found


@dataclass(frozen=True)
class Plan:
    """Every node's decision (by node name), the breaker after this run (its quarantines recorded; opened
    when one was refused), its limit and the serving nodes it was computed from."""

    decisions: dict[str, Decision]
    breaker: BreakerState
    limit: int
    serving: int
    window_min: int
    # Report.guardian's ``leaves``: each bad leaf that explains a node's failures -> why, and whose
    leaves: dict[str, str] = field(default_factory=dict)


def _drain_state() -> Any:
    """module_utils/node/drain_state.py, the one builder of gpufleet's drain reasons (the gate's drain
    and its filter use it), imported from this checkout's collection (stdlib and core/results only)."""
    runner.ensure_collection_link()
    if str(runner.COLLECTIONS_DIR) not in sys.path:
        sys.path.append(str(runner.COLLECTIONS_DIR))
    return importlib.import_module(_DRAIN_STATE)


def drain_reason(checks: Sequence[Mapping[str, Any]], classes: Mapping[str, list[str]]) -> str:
    """The quarantine's drain reason: ``gpufleet watch: `` and the failed checks of its unsafe classes, in
    their order (at most 128 printable characters, drain_state.drain_reason)."""
    by_name: dict[str, Mapping[str, Any]] = {}
    for check in checks:
        if isinstance(check, Mapping) and not check.get("ok", True):
            by_name.setdefault(str(check.get("name", "")), check)
    named = [dict(by_name[name]) for names in classes.values() for name in names if name in by_name]
    return str(_drain_state().drain_reason(WHAT, named, quarantine.describe(classes)))


def loss_order(node: str, classes: Mapping[str, list[str]]) -> tuple[int, str]:
    """The order the breaker admits candidates in: the most certain loss first, then the name."""
    first = min((_ORDER.index(c) for c in classes if c in _ORDER), default=len(_ORDER))
    return first, node


def _device(check_name: str) -> str:
    """``rdma_link.link_state[mlx5_0]`` -> ``mlx5_0``."""
    return check_name.split("[", 1)[1].rstrip("]") if "[" in check_name else ""


def fabric_leaf(
    classes: Mapping[str, list[str]], cabling: Mapping[str, Any], leaf_verdicts: Mapping[str, str]
) -> dict[str, list[str]]:
    """The bad leaves that explain a node's unsafe failures ({leaf: ["mlx5_0 to leaf02:swp3", ...]}): only
    when its sole unsafe class is roce_port_down and every port down is cabled (``cabling``: the node's
    fabric_cabling, RoCE device -> "leaf:port") to a leaf in ``leaf_verdicts``; else {}."""
    if list(classes) != [ROCE_PORT_DOWN] or not classes[ROCE_PORT_DOWN]:
        return {}
    found: dict[str, list[str]] = {}
    for name in classes[ROCE_PORT_DOWN]:
        device = _device(name)
        peer = cabling.get(device) if isinstance(cabling, Mapping) else None
        if not isinstance(peer, str) or peer.count(":") != 1:
            return {}
        leaf = peer.split(":", 1)[0]
        if leaf not in leaf_verdicts:
            return {}
        found.setdefault(leaf, []).append(f"{device} to {peer}")
    return found


def _left_alone(
    node: str,
    history: Sequence[Any],
    record: str | None,
    drained: str | None,
    classes: Mapping[str, list[str]],
    mark: Mapping[str, Any] | None = None,
) -> Decision | None:
    """left_alone when the node is already out of service, else None (``mark``: the node's failed
    guardian.replace_hardware check, when its history was not given)."""
    pending = pending_replace(history)
    if pending is None and mark is not None and mark.get("value") != UNREAD:
        return Decision(
            LEFT_ALONE,
            classes,
            replace_hardware=True,
            why=f"replace hardware ({mark.get('value')}): "
            f'never remediated again; gpufleet release --limit {node} --reason "..." clears it',
        )
    if pending is not None:
        return Decision(
            LEFT_ALONE,
            classes,
            replace_hardware=True,
            why=(
                f"replace hardware ({pending.get('class') or 'no class'}, since {pending.get('time')}): "
                f'never remediated again; gpufleet release --limit {node} --reason "..." clears it'
            ),
        )
    if record is not None:
        return Decision(
            LEFT_ALONE,
            classes,
            why=f"out of service by gpufleet's drain record ({' '.join(record.split())[:120] or 'empty'}): "
            "the gate returns it",
        )
    if drained is not None:
        ours = bool(_drain_state().is_ours(drained))
        whose = "gpufleet's reason" if ours else "a person's reason"
        return Decision(
            LEFT_ALONE,
            classes,
            why=f"the scheduler shows it drained ({whose}: "
            f"{' '.join(drained.split())[:120] or 'none given'}): not acted on again",
        )
    return None


def _candidate(
    node: str,
    checks: Sequence[Mapping[str, Any]],
    history: Sequence[Any],
    classes: dict[str, list[str]],
    settings: GuardianSettings,
    now: datetime,
    history_unread: bool = False,
) -> Decision:
    """A node to quarantine: its drain reason, and replace_hardware or its remediation (none when its
    history could not be read: whether it is a repeat offender is unknown)."""
    reason = drain_reason(checks, classes)
    failed = [c for c in checks if isinstance(c, Mapping) and not c.get("ok", True)]
    escalation = escalate_node(history, classes, failed, now, settings)
    unsafe = quarantine.describe(classes)
    if escalation.replace:
        return Decision(QUARANTINE, classes, reason, "", True, why=f"{unsafe}; {escalation.why}")
    if history_unread:
        return Decision(
            QUARANTINE,
            classes,
            reason,
            why=f"{unsafe}; its remediation history could not be read ({MARK_CHECK}): no remediation "
            "(whether it is a repeat offender is unknown): it stays out",
        )
    chosen = next((c for c in classes if settings.remediation_for(c)), "")
    if chosen:
        remediation = settings.remediation_for(chosen)
        then = f"{remediation} (guardian_remediation[{chosen}]), then the gate"
    else:
        remediation = ""
        then = "no remediation configured for " + ", ".join(classes) + " (guardian_remediation): it stays out"
    history_note = f" ({escalation.why})" if escalation.why and remediation else ""
    return Decision(QUARANTINE, classes, reason, remediation, False, why=f"{unsafe}; {then}{history_note}")


def _history(given: Any) -> list[Any]:
    """A node's history events: the list the watch's reading carries (the module's ``history``), or the
    file's own ``{"events": [...]}``; nothing else is a history."""
    if isinstance(given, Mapping):
        given = given.get("events")
    return list(given) if isinstance(given, list | tuple) else []


def serving_count(decisions: Mapping[str, Decision]) -> int:
    """The nodes in service when the run started: every node not left alone."""
    return sum(1 for d in decisions.values() if d.decision != LEFT_ALONE)


def plan(
    hosts: Mapping[str, Sequence[Mapping[str, Any]]],
    histories: Mapping[str, Sequence[Any]],
    drain_records: Mapping[str, str | None],
    settings: Mapping[str, GuardianSettings],
    breaker_state: BreakerState,
    leaf_verdicts: Mapping[str, str],
    cabling: Mapping[str, Mapping[str, Any]],
    now: datetime,
    *,
    scheduler_drained: Mapping[str, str | None] | None = None,
    serving_nodes: int | None = None,
) -> Plan:
    """Every node's decision and the breaker after this run.

    - ``hosts``: node -> the watch's checks for it;
    - ``histories``: node -> its remediation history events, oldest first (or the history file's
      ``{"events": [...]}``);
    - ``drain_records``: node -> the drain role's record on it, None when there is none;
    - ``settings``: guardian_settings.settings_for's result (a node without: the defaults);
    - ``breaker_state``: the breaker as loaded, not changed (the plan's ``breaker`` is a new state);
    - ``leaf_verdicts``: leaf -> why it is bad (the leaves this run found down or without PFC/ECN);
    - ``cabling``: node -> its fabric_cabling hostvar (RoCE device -> "leaf:port");
    - ``scheduler_drained``: node -> the reason the scheduler shows it drained for (absent or None: not
      drained);
    - ``serving_nodes``: the breaker's base, by default every node not left alone."""
    drained = scheduler_drained or {}
    decisions: dict[str, Decision] = {}
    candidates: dict[str, Decision] = {}
    for node in sorted(hosts):
        checks = [c for c in hosts[node] if isinstance(c, Mapping)]
        history = _history(histories.get(node))
        classes = quarantine.unsafe_classes(checks)
        mark = next((c for c in checks if c.get("name") == MARK_CHECK and not c.get("ok", True)), None)
        out = _left_alone(node, history, drain_records.get(node), drained.get(node), classes, mark)
        if out is not None:
            decisions[node] = out
            continue
        if not classes:
            decisions[node] = Decision(NONE)
            continue
        leaves = fabric_leaf(classes, cabling.get(node) or {}, leaf_verdicts)
        if leaves:
            decisions[node] = Decision(
                FABRIC,
                classes,
                leaf=", ".join(sorted(leaves)),
                why="; ".join(
                    f"{leaf}: {leaf_verdicts[leaf]} (its ports here: {', '.join(ports)})"
                    for leaf, ports in sorted(leaves.items())
                )
                + ": the leaf's fault, not the node's; not quarantined",
            )
            continue
        own = settings.get(node) or GuardianSettings()
        unread = mark is not None and mark.get("value") == UNREAD
        candidates[node] = decisions[node] = _candidate(node, checks, history, classes, own, now, unread)
    breaker = fleet_breaker(settings)
    serving = serving_count(decisions) if serving_nodes is None else serving_nodes
    limit = guardian_breaker.limit(breaker, serving)
    window = timedelta(minutes=breaker.window_min)
    after = copy.deepcopy(breaker_state)
    for node in sorted(candidates, key=lambda n: loss_order(n, candidates[n].classes)):
        chosen = candidates[node]
        if guardian_breaker.admit(after, node, now, limit, window):
            guardian_breaker.record(after, node, now)
            continue
        would = "replace hardware" if chosen.replace_hardware else (chosen.remediation or "quarantine only")
        decisions[node] = Decision(
            WOULD_QUARANTINE,
            chosen.classes,
            chosen.reason,
            chosen.remediation,
            chosen.replace_hardware,
            why=(
                f"the circuit breaker is open (since {after.opened}: {after.opened_why}): "
                f"{quarantine.describe(chosen.classes)}; would quarantine ({would}); "
                'gpufleet breaker close --reason "..." closes it'
            ),
        )
    explained: dict[str, list[str]] = {}
    for node, decision in sorted(decisions.items()):
        if decision.decision == FABRIC:
            for leaf in decision.leaf.split(", "):
                explained.setdefault(leaf, []).append(node)
    named = {
        leaf: f"{leaf_verdicts[leaf]}: explains the RoCE ports down on {', '.join(nodes)}"
        for leaf, nodes in sorted(explained.items())
    }
    return Plan(dict(sorted(decisions.items())), after, limit, serving, breaker.window_min, named)
