"""Reaping what we start. PID 1 on some machines (containers, microVMs) never reaps
orphans, so a long-lived gpufleet process adopts its orphaned descendants (ssh
ControlPersist masters, the sim supervisor) and waits on them before it exits."""

from __future__ import annotations

import contextlib
import ctypes
import os
import time

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_children(timeout: float = 0.0) -> int:
    """Waits (up to timeout seconds) for every child to exit; returns how many were reaped."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
            continue
        if time.monotonic() >= deadline:
            return reaped
        time.sleep(0.05)


def reap(pid: int) -> None:
    """Collects one child's exit status, if it is ours."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
