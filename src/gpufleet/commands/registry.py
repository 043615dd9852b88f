"""Every gpufleet command, once. The CLI builds its subparsers from COMMANDS and runs them; the
console (progress.Display, given console_judges()) and `report --from-events` judge a run's hosts with
the judges of its command here."""

from __future__ import annotations

from typing import TextIO

from gpufleet.commands import (
    base,
    breaker,
    check,
    drift,
    facts,
    gate,
    provision,
    release,
    report,
    switch,
    watch,
)
from gpufleet.progress import Display, Judges

# In `gpufleet --help`'s order.
COMMANDS: dict[str, base.Command] = {
    c.name: c
    for c in (
        facts.COMMAND,
        provision.COMMAND,
        check.COMMAND,
        switch.COMMAND,
        gate.COMMAND,
        drift.COMMAND,
        watch.COMMAND,
        breaker.COMMAND,
        release.COMMAND,
        report.COMMAND,
    )
}


def console_judges() -> Judges:
    """The judges the console is given: each command's, so it says of a host what its report will."""
    return base.console_judges(COMMANDS)


def console(stream: TextIO | None = None, verbose: bool = False, total: int | None = None) -> Display:
    """What a run prints while it goes (stderr unless ``stream``), judging hosts as the reports do;
    ``total``: the hosts the first run reaches (the preflight counts them)."""
    return Display(stream, verbose=verbose, judges=console_judges(), total=total)
