"""SIGINT and SIGTERM during a run: the first lets the work under way finish and starts nothing new
(drift --fix stops between batches, so no node is left half-provisioned or drained by gpufleet's
own stop); a second stops the running playbook now. Either way the report says what happened.

ansible-runner would otherwise install its own handlers and kill ansible-playbook at the first
signal, leaving no report; gpufleet gives it :meth:`Interrupt.stop_now` as its cancel callback.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupt:
    """What the operator asked: nothing, finish what is under way (one signal), or stop now (two)."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.now = False

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def handle(self, signum: int, frame: FrameType | None = None) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is None:
            self.signal_name = name
            print(
                f"gpufleet: {name}: finishing the work under way and starting nothing new; "
                "send it again to stop now",
                file=sys.stderr,
                flush=True,
            )
            return
        self.now = True
        print(f"gpufleet: {name} again: stopping the running playbook now", file=sys.stderr, flush=True)

    def stop_now(self) -> bool:
        """ansible-runner's cancel callback: True once a second signal came."""
        return self.now

    def described(self) -> str:
        """What the operator asked, for the run's report ('' when no signal came)."""
        if self.signal_name is None:
            return ""
        if self.now:
            return (
                f"asked to stop by {self.signal_name}, twice: the playbook under way was stopped "
                "before its end (each host it reached says where it stood)"
            )
        return (
            f"asked to stop by {self.signal_name}: the work under way was finished and nothing new "
            "was started"
        )


@contextlib.contextmanager
def installed(asked: Interrupt | None = None) -> Iterator[Interrupt]:
    """SIGINT and SIGTERM go to ``asked`` (a fresh Interrupt when None) while the block runs; the
    previous handlers after. Nothing is kept in this module: the Interrupt travels with the run's
    options (runner.RunOptions.interrupt), so a run made after a signal (the gate's stop, a lock's
    release) gets a fresh one and the command's own still says what was asked."""
    asked = asked if asked is not None else Interrupt()
    previous = {s: signal.signal(s, asked.handle) for s in SIGNALS}
    try:
        yield asked
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
