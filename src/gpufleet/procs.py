"""Reaping what we start. PID 1 on some machines (containers, microVMs) never reaps
orphans, so a long-lived gpufleet process adopts its orphaned descendants (ssh
ControlPersist masters, the sim supervisor) and waits on them before it exits."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

import psutil

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


def _with_environ(entry: bytes) -> list[int]:
    """Processes whose environment holds ``entry`` (``NAME=value``, exactly)."""
    name, _, value = entry.decode().partition("=")
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(name) == value:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue  # gone, a zombie, or not ours to read
    return found


def stop_marked(entry: str, grace: float = 5.0) -> list[int]:
    """Stops what one run left behind, found by a variable only that run's processes carry (never by
    name): SIGTERM to each one's process group (ansible-core's workers lead their own), SIGKILL to
    what is left after ``grace`` seconds. Returns the pids found."""
    marker = entry.encode()
    found = _with_environ(marker)
    _signal_all(found, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _with_environ(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_all(_with_environ(marker), signal.SIGKILL)
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    """``sig`` to each process's group, or to the process alone when it shares ours."""
    for pid in pids:
        with contextlib.suppress(OSError):
            group = os.getpgid(pid)
            if group == os.getpgrp():
                os.kill(pid, sig)
            else:
                os.killpg(group, sig)
