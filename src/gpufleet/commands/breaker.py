"""`gpufleet breaker`: the guardian's circuit breaker (issue 39) printed; `gpufleet breaker close --reason
"..."` closes it. Runs no playbook: the breaker is a file in gpufleet's state directory
(guardian_breaker), on the controller that runs `gpufleet watch --act`."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpufleet import guardian_breaker, preflight
from gpufleet.commands.base import EXIT_OK, Command, UsageError
from gpufleet.guardian_breaker import BreakerState
from gpufleet.guardian_escalation import iso
from gpufleet.guardian_settings import BreakerSettings, fleet_breaker, settings_for
from gpufleet.printable import printable


def _fleet(inventory: Path) -> tuple[BreakerSettings, int]:
    """The breaker's settings and the GPU nodes of the inventory (the limit's base when all serve)."""
    listed = preflight.read_inventory(inventory)
    nodes = sorted(preflight.group_members(listed, preflight.NODE_GROUP))
    hostvars = (listed.get("_meta") or {}).get("hostvars", {})
    return fleet_breaker(settings_for({n: hostvars.get(n) or {} for n in nodes})), len(nodes)


def describe(
    state: BreakerState, where: Path, now: datetime, fleet: tuple[BreakerSettings, int] | None = None
) -> list[str]:
    """The breaker's state in lines: open or closed, its limit and what is used of it in the window
    (with ``fleet``: the settings and the inventory's GPU nodes), when it opened and why, its last
    close and reason, the file."""
    lines = []
    if state.open:
        lines.append(f"breaker: OPEN since {state.opened} ({state.opened_why or 'no reason recorded'})")
        lines.append("  the guardian quarantines no node until a person closes it:")
        lines.append('  gpufleet breaker close --reason "<what was checked>"')
    else:
        lines.append("breaker: closed")
    if fleet is not None:
        settings, nodes = fleet
        window = timedelta(minutes=settings.window_min)
        limit = guardian_breaker.limit(settings, nodes)
        counted = guardian_breaker.in_window(state, now, window)
        lines.append(
            f"limit: {limit} node{'s' if limit != 1 else ''} per {settings.window_min} min "
            f"(guardian_breaker_max_nodes {settings.max_nodes}, guardian_breaker_max_percent "
            f"{settings.max_percent:g} of {nodes} GPU nodes in the inventory; a run counts the nodes serving)"
        )
        shown = ", ".join(f"{e['node']} {e['time']}" for e in counted[-5:])
        lines.append(
            f"used: {len(counted)} in the last {settings.window_min} min" + (f" ({shown})" if shown else "")
        )
    if state.closed_by_reason:
        last = state.closed_by_reason[-1]
        lines.append(f"last closed: {last.get('time')}: {last.get('reason')}")
    lines.append(f"state: {where}")
    return [printable(line) for line in lines]


def close(where: Path, reason: str, now: datetime) -> list[str]:
    """The breaker closed with ``reason`` (UsageError when the reason is out of range), under the state
    file's lock; what to print."""
    try:
        guardian_breaker.check_reason(reason)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with guardian_breaker.held(where):
        state = guardian_breaker.load(where)
        opened = state.opened
        was_open = guardian_breaker.close(state, reason, now)
        guardian_breaker.save(state, where)
    said = f"closed the breaker (open since {opened})" if was_open else "the breaker was not open"
    forgiven = state.closed_by_reason[-1].get("forgiven") or []
    if forgiven:
        said += f"; {len(forgiven)} quarantine{'s' if len(forgiven) != 1 else ''} counted so far forgiven"
        said += f" ({', '.join(str(n) for n in forgiven[-5:])})"
    return [printable(f"{said}; reason recorded at {iso(now)}"), *describe(state, where, now)]


def _alone(args: argparse.Namespace, commands: Mapping[str, Command]) -> int:
    where = guardian_breaker.path()
    now = datetime.now(UTC)
    if args.breaker_action == "close":
        lines = close(where, args.reason, now)
    else:
        state = guardian_breaker.load(where)
        fleet = _fleet(preflight.inventory_file(args.inventory))
        lines = describe(state, where, now, fleet)
    print("\n".join(lines))
    return EXIT_OK


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inventory",
        "-i",
        type=Path,
        help="inventory whose guardian_breaker_* settings give the limit (default: ANSIBLE_INVENTORY, else "
        "the inventory of gpufleet's ansible.cfg)",
    )
    sub = parser.add_subparsers(dest="breaker_action", metavar="{close}")
    closing = sub.add_parser(
        "close",
        help="close the open breaker, with the reason a person gives",
        description="Close the guardian's circuit breaker: the watch that acts may quarantine nodes again. "
        "The reason is recorded with the time in the breaker's state, and the quarantines counted so far "
        "are forgiven (else the next run would open it again at once).",
    )
    closing.add_argument(
        "--reason",
        required=True,
        help=f"why it may close (1..{guardian_breaker.REASON_MAX} printable characters), e.g. "
        "'gpu-03 RMA filed, gpu-04 and gpu-05 checked'",
    )


COMMAND = Command(
    name="breaker",
    summary="the guardian's circuit breaker: its state; 'breaker close --reason ...' closes it",
    description="Print the circuit breaker of the watch that acts (gpufleet watch --act): open or closed, "
    "its limit (guardian_breaker_max_nodes and guardian_breaker_max_percent of the inventory's GPU nodes, "
    "per guardian_breaker_window_min), the quarantines counted in its window, when it opened and why, and "
    "its last close. An open breaker stops the guardian from quarantining more nodes (they are reported "
    "'would quarantine') until a person runs 'gpufleet breaker close --reason \"...\"'. Runs no playbook: "
    "the state is guardian/breaker.json in gpufleet's state directory (GPUFLEET_STATE_DIR).",
    add_arguments=_arguments,
    alone=_alone,
)
