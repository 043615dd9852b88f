"""`gpufleet drift [--fix]`: every role compared with every node, and a rolling fix of the drifted ones.

Drift is playbooks/drift.yml: one gpufleet.node.node_facts run per node, nothing written. The fix
runs playbooks/drift_fix.yml (judge and hold, drain, every role, undrain) on the drifted nodes and the
nodes a run left drained, one serial batch at a time, and stops the rollout when a batch fails more
than the allowed percentage; the nodes it did not reach are reported as blocked.

What the fix would only be refused for is left out of the rollout, never drained, and named with why:
a node drift already refused (its inputs, a role that cannot be planned, its fabric), and the leaf
switches (`gpufleet switch` changes them; drift --fix changes nodes only).

The odd node out: node_facts also returns each node's driver, CUDA, VBIOS and NIC firmware
(``gpufleet_versions``), and the gate's judge (plugins/module_utils/node/fleet_versions.py) compares them
here, across every node of the report (compare_versions), for a local run and for the slices of one
job alike (from_events): one pass on the controller, no task per node.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from gpufleet import catalog, checks, runner
from gpufleet.report import HostReport, Report, now

# Forks sized to the fleet: Ansible never starts more workers than hosts, so this is a ceiling.
DRIFT_FORKS = 256


@dataclass(frozen=True)
class DriftOptions(runner.Target):
    fix: bool = False
    batch: str = "10%"
    max_fail_percent: float = 0.0
    break_lock: bool = False


def batch_size(spec: str, total: int) -> int:
    """'10%' of total (at least 1) or a count; ValueError names what is accepted."""
    text = spec.strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 < percent <= 100:
                raise ValueError
            return max(1, math.ceil(total * percent / 100))
        count = int(text)
        if count < 1:
            raise ValueError
        return count
    except ValueError:
        raise ValueError(f"--batch {spec!r}: use a count (5) or a percentage of the nodes (10%)") from None


def batches(names: list[str], size: int) -> list[list[str]]:
    return [names[i : i + size] for i in range(0, len(names), size)]


def over_limit(failed: int, batch: int, max_fail_percent: float) -> bool:
    """A batch stops the rollout when more than max_fail_percent of its nodes failed."""
    return batch > 0 and failed * 100.0 / batch > max_fail_percent


def _failed_task(result: runner.HostResult, outcome: str) -> dict[str, object]:
    return next((t for t in result.tasks if t["outcome"] == outcome), {})


VERSIONS_FACT = "gpufleet_versions"
# the fleet's known versions (thermal_gate_fleet_versions), as node_facts returns them beside the versions
KNOWN_FACT = "gpufleet_known_versions"
VERSIONS_CHECK = "fleet.versions"
_FLEET_VERSIONS = "ansible_collections.gpufleet.node.plugins.module_utils.node.fleet_versions"


def _fleet_versions() -> Any:
    """module_utils/node/fleet_versions.py, the gate's judge (judge_all: every node at once) and its
    validate_known, imported from this checkout's collection (stdlib and the collection's results.py:
    nothing of Ansible's)."""
    runner.ensure_collection_link()
    if str(runner.COLLECTIONS_DIR) not in sys.path:
        sys.path.append(str(runner.COLLECTIONS_DIR))
    return importlib.import_module(_FLEET_VERSIONS)


def _versions_judge() -> Callable[..., dict[str, list[dict[str, Any]]]]:
    return cast(Callable[..., dict[str, list[dict[str, Any]]]], _fleet_versions().judge_all)


def _known_versions(hosts: Mapping[str, runner.HostResult]) -> dict[str, Any]:
    """The fleet's known versions the nodes returned (KNOWN_FACT), one mapping for the run: an entry of
    another shape, or two nodes that give one GPU product different versions, is refused naming them."""
    fleet_versions = _fleet_versions()
    known: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    for name in sorted(hosts):
        found = hosts[name].facts.get(KNOWN_FACT)
        if found is None:
            continue
        wrong = fleet_versions.validate_known(found)
        if wrong:
            raise ValueError(f"host {name}: its {KNOWN_FACT}: {'; '.join(wrong)}")
        for product, expected in found.items():
            if product in known and known[product] != expected:
                raise ValueError(
                    f"{fleet_versions.SETTING}[{product!r}] differs between {given_by[product]} and {name}: "
                    "give the fleet one set of known versions per GPU product"
                )
            known[product], given_by[product] = expected, name
    return known


def _shape_error(found: Any) -> str | None:
    """What is wrong with a node's versions when they are not node_health's shape (a hand-made event:
    report --from-events names it rather than judging it), else None."""
    if not isinstance(found, dict):
        return "not a mapping"
    for key in ("gpu_product", "vbios", "nic_firmware"):
        value = found.get(key)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{key} is not a list of strings"
    for key in ("driver", "cuda"):
        if not (found.get(key) is None or isinstance(found.get(key), str)):
            return f"{key} is not a string"
    if type(found.get("gpu_count")) is not int:
        return "gpu_count is not a whole number"
    return None


def compare_versions(hosts: Mapping[str, runner.HostResult]) -> None:
    """Adds to each node that returned its versions its ``fleet.versions[<field>]`` checks against
    the others' (same GPU product, at least three, a majority; else the fleet's known versions the
    nodes returned, KNOWN_FACT): the odd node out fails, naming its version and the expected one.
    Hosts without versions (leaves, unreachable nodes) are neither judged nor counted as peers.
    Judging the same hosts again adds nothing (the console's end-of-run lines and the report both
    judge them)."""
    fleet = {name: r.facts[VERSIONS_FACT] for name, r in hosts.items() if VERSIONS_FACT in r.facts}
    for name, found in fleet.items():
        wrong = _shape_error(found)
        if wrong:
            raise ValueError(f"host {name}: its {VERSIONS_FACT}: {wrong}")
    if not fleet:
        return
    verdicts = _versions_judge()(fleet, _known_versions(hosts))
    for name in sorted(verdicts):
        judged = hosts[name].checks
        judged.extend([c for c in verdicts[name] if c not in judged])


def drift_host(result: runner.HostResult) -> HostReport:
    """A node's drift from its node_facts result: unreachable, failed (a role could not be compared,
    or a check configuration cannot fix failed), drifted (changes) or ok."""
    host = HostReport(checks=result.checks, changes=result.changes)
    host.status = checks.host_status(
        unreachable=result.unreachable,
        failed=result.failed,
        checks=result.checks,
        changes=result.changes,
        check_mode=True,
    )
    host.configuration_error = result.refused_for_input()
    if result.unreachable:
        host.message = result.failure_message()
    elif result.failed:
        host.message = str(_failed_task(result, "failed").get("msg") or "failed").strip()
    elif host.status == "failed":
        host.message = "; ".join(str(c["message"]) for c in result.checks if not c["ok"])
    return host


# The play of drift_fix.yml whose failure leaves the node in service (it was never drained).
JUDGE_PLAY = "Judge each node of this batch before it is drained"
LEFT_DRAINED = "drain.left_drained"


def fixed_status(result: runner.HostResult) -> str:
    """A node's status after its batch: changed (fixed) when the roles ran through without failing
    (the report's, and the console's line for it)."""
    return checks.host_status(unreachable=result.unreachable, failed=result.failed, changed=True)


def _fixed_host(before: HostReport, result: runner.HostResult | None, batch: int) -> HostReport:
    host = HostReport(checks=before.checks, changes=before.changes, facts=before.facts)
    if result is None:
        host.status, host.message = "failed", f"batch {batch}: not in the run's results"
        return host
    host.status = fixed_status(result)
    if result.unreachable:
        host.message = f"batch {batch}: {result.failure_message()}"
    elif result.failed:
        task = _failed_task(result, "failed")
        host.configuration_error = result.refused_for_input()
        host.checks = [*before.checks, *(c for c in result.checks if c not in before.checks)]
        if str(task.get("play", "")).startswith((runner.INPUTS_PLAY, JUDGE_PLAY)):
            refused = f"{task.get('task', '?')}: {task.get('msg') or 'failed'}"
            host.message = f"batch {batch}: refused before the drain, left as it was: {refused}"
            return host
        host.message = f"batch {batch}: {task.get('task', '?')}: {task.get('msg') or 'failed'}"
        if result.drained():
            host.message += "; left drained"
    else:
        # the fix reads no versions and its roles change none: drift's comparison of them stands
        compared = [c for c in before.checks if c["name"].startswith(VERSIONS_CHECK)]
        host.checks = [*result.checks, *compared]
        host.message = f"fixed in batch {batch}"
        if not before.changes:
            host.message = (
                f"returned to service in batch {batch}: a run had left it drained; re-judged, nothing drifted"
            )
        odd = [str(c["message"]) for c in compared if not c["ok"]]
        if odd:
            host.status = "failed"
            host.message += "; no role changes its versions: " + "; ".join(odd)
    return host


def _leaves(result: runner.RunResult) -> frozenset[str]:
    """The leaf switches of a drift run: hosts whose every task is the leaves' read."""
    return frozenset(
        name
        for name, host in result.hosts.items()
        if host.tasks and all(str(t.get("play", "")).startswith(catalog.LEAF_READ_PLAY) for t in host.tasks)
    )


def _left_drained(host: HostReport) -> bool:
    return any(c["name"] == LEFT_DRAINED and not c["ok"] for c in host.checks)


def _not_drained_why(host: HostReport, compared: runner.HostResult | None) -> str | None:
    """Why drift --fix leaves a node it would target out of the rollout (its batch's judgement before the
    drain would refuse it the same way), else None."""
    if host.configuration_error or (compared is not None and compared.failed):
        return host.message or "drift could not compare it"
    fabric = [c for c in host.checks if not c["ok"] and c["name"].startswith("fabric.")]
    if fabric:
        names = ", ".join(c["name"] for c in fabric[:4]) + (
            f" and {len(fabric) - 4} more" if len(fabric) > 4 else ""
        )
        return (
            f"its fabric fails {names}: nothing changed on the node fixes its cabling or its leaves "
            "(gpufleet switch applies a leaf's profile; a leaf that cannot be read must answer first)"
        )
    return None


def check(options: DriftOptions, progress: runner.Progress | None = None) -> Report:
    return _compare(options, progress)[0]


def _compare(
    options: DriftOptions, progress: runner.Progress | None = None
) -> tuple[Report, runner.RunResult]:
    result = runner.run_playbook(
        options.run_options("drift.yml", forks=DRIFT_FORKS),
        progress=progress,
    )
    report = Report(command="drift", started=now())
    compare_versions(result.hosts)
    for name in sorted(result.hosts):
        report.hosts[name] = drift_host(result.hosts[name])
    return report, result


def fix(
    options: DriftOptions,
    report: Report,
    progress: runner.Progress | None = None,
    compared: runner.RunResult | None = None,
) -> Report:
    """Rolls the roles out to the drifted nodes of ``report`` (and returns the nodes a run left drained)
    in batches; returns the updated report. ``compared``: drift's own run, which tells the leaves and the
    nodes it could not compare."""
    report.command = "drift --fix"
    hosts = compared.hosts if compared is not None else {}
    leaves = _leaves(compared) if compared is not None else frozenset()
    targets = []
    for name in sorted(report.hosts):
        host = report.hosts[name]
        if not (host.changes or _left_drained(host)) or host.status not in ("drifted", "failed"):
            continue
        if name in leaves:
            host.message = (
                f"not changed: drift --fix changes nodes only; gpufleet switch --limit {name} applies the "
                "leaf's lossless RoCE profile"
            )
            continue
        why = _not_drained_why(host, hosts.get(name))
        if why:
            left = "not returned to service" if _left_drained(host) else "not fixed, left out of the rollout"
            host.message = f"{left}: {why}"
            continue
        # Drifted nodes, nodes left drained, and nodes that also fail a check (a link down): the roles are
        # what fixes the settings, and a node they cannot fix fails its batch instead of being skipped.
        targets.append(name)
    size = batch_size(options.batch, len(targets))
    plan = batches(targets, size)
    for number, batch in enumerate(plan, start=1):
        asked = options.interrupt
        if asked is not None and asked.requested:
            # Stopped between batches: every node is whole (fixed, or still drifted and in service).
            _not_started(report, plan[number - 1 :], f"gpufleet was interrupted ({asked.signal_name})")
            break
        if progress:
            progress(f"drift --fix: batch {number}/{len(plan)}: {', '.join(batch)}")
        try:
            result = runner.run_playbook(
                options.run_options(
                    "drift_fix.yml",
                    limit=",".join(batch),
                    forks=max(1, len(batch)),
                    break_lock=options.break_lock,
                ),
                progress=progress,
            )
        except runner.Canceled as exc:
            for name in batch:
                host = report.hosts[name]
                host.status = "interrupted"
                # where its events left it: the task it was on, the drain task that drained it (named)
                stopped = exc.hosts.get(name) or runner.HostResult(name=name)
                host.message = (
                    f"batch {number}: {exc}: {stopped.where_stopped()}; it may be half-provisioned: "
                    "run gpufleet drift to see where it stands, then drift --fix again"
                )
            _not_started(report, plan[number:], f"gpufleet was stopped during batch {number}")
            break
        for name in batch:
            report.hosts[name] = _fixed_host(report.hosts[name], result.hosts.get(name), number)
        failed = sum(1 for name in batch if report.hosts[name].status != "changed")
        if over_limit(failed, len(batch), options.max_fail_percent):
            for later in plan[number:]:
                for name in later:
                    host = report.hosts[name]
                    host.status = "blocked"
                    host.message = (
                        f"not reached: rollout stopped after batch {number} "
                        f"({failed} of {len(batch)} failed, "
                        f"over --max-fail-percent {options.max_fail_percent:g})"
                    )
            break
    return report


def _not_started(report: Report, later: list[list[str]], why: str) -> None:
    for batch in later:
        for name in batch:
            host = report.hosts[name]
            host.status = "interrupted"
            host.message = f"not started: {why}; still drifted, left in service"


def drift(options: DriftOptions, progress: runner.Progress | None = None) -> Report:
    """drift, and with options.fix the rollout: the report (unwritten: the CLI writes every report)."""
    started = now()
    report, compared = _compare(options, progress)
    report.started = started
    if options.fix:
        report = fix(options, report, progress, compared)
    report.finished = now()
    return report
