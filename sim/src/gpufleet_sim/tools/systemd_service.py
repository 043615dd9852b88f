"""Long-running services (Type=simple/exec) on a simulated node: what systemd's manager does.

`systemctl start` launches this module as the unit's manager process (`python3 -m
gpufleet_sim.tools.systemd_service NODE_DIR UNIT`). It starts ExecStart in its own session with
the unit's environment, its output in a per-unit log under the node's /run, records MainPID in
the node state, waits for it, applies Restart=, and records how it ended. `systemctl stop` marks
the unit stopping and signals the service's process group.

Unit state keys: active, result, sub (start|running|auto-restart|dead|failed), pid + pid_start
(MainPID and its start time, so a reused pid is not mistaken for it), manager + manager_start,
stopping, exit_status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpufleet_sim import state
from gpufleet_sim.tools import systemd_units as units

# Inside a node /run is its own tmpfs: logs go the way a volatile journal's do at a reboot.
LOG_DIR = Path("/run/log/units")
SRC_DIR = Path(__file__).resolve().parents[2]
SERVICE_TYPES = ("simple", "exec", "notify", "idle")
# systemd's defaults: DefaultTimeoutStopSec=90s, RestartSec=100ms, StartLimitBurst=5 per 10 s.
STOP_TIMEOUT_S = 90.0
RESTART_S = 0.1
START_LIMIT = (5, 10.0)
START_WAIT_S = 10.0
# Exits systemd counts as clean besides 0 (SuccessExitStatus's defaults).
CLEAN_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (/proc/PID/stat field 22); None if gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def alive(pid: Any, started: Any) -> bool:
    return pid is not None and started is not None and start_time(int(pid)) == int(started)


def _seconds(text: str, default: float) -> float:
    text = text.strip()
    if not text:
        return default
    if text == "infinity":
        return float("inf")
    for suffix, scale in (("ms", 0.001), ("min", 60.0), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * scale
    return float(text)


def stop_timeout(unit: units.Unit) -> float:
    return _seconds(units.value(unit, "Service", "TimeoutStopSec"), STOP_TIMEOUT_S)


# -- the systemctl side ---------------------------------------------------------------------------
def launch(node_dir: Path, name: str) -> bool:
    """Starts the unit's manager and waits until the service runs (True) or has failed (False)."""
    with state.locked(node_dir) as node:
        current = node.setdefault("units", {}).setdefault(name, {"enabled": False})
        for key in ("pid", "pid_start", "stopping", "exit_status"):
            current.pop(key, None)
        current.update(active=True, result=None, sub="start")
    argv = [sys.executable, "-sS", "-m", __name__, str(node_dir), name]
    env = {"PATH": units.BASE_ENV["PATH"], "PYTHONPATH": str(SRC_DIR)}
    manager = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        current = state.load(node_dir)["units"][name]
        if current.get("pid") or current.get("result") == "failed" or not current.get("active"):
            return bool(current.get("result") != "failed")
        if manager.poll() is not None:
            break
        time.sleep(0.02)
    return False


def stop(node_dir: Path, name: str, unit: units.Unit) -> None:
    """SIGTERM (KillSignal=) to the service's process group, SIGKILL after TimeoutStopSec."""
    with state.locked(node_dir) as node:
        current = node.setdefault("units", {}).setdefault(name, {"enabled": False})
        current["stopping"] = True
        pid, started = current.get("pid"), current.get("pid_start")
        manager = (current.get("manager"), current.get("manager_start"))
    if alive(pid, started):
        kill_signal = getattr(signal, units.value(unit, "Service", "KillSignal", "SIGTERM"), signal.SIGTERM)
        _signal_group(int(pid), kill_signal)
        deadline = time.monotonic() + stop_timeout(unit)
        while alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.02)
        if alive(pid, started):
            _signal_group(int(pid), signal.SIGKILL)
    # the manager records the exit; wait for it so it cannot restart what was stopped
    deadline = time.monotonic() + 5.0
    while alive(*manager) and time.monotonic() < deadline:
        time.sleep(0.02)
    with state.locked(node_dir) as node:
        current = node["units"][name]
        for key in ("pid", "pid_start", "stopping", "manager", "manager_start"):
            current.pop(key, None)
        current.update(active=False, result="success", sub="dead")


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def active_state(current: dict[str, Any]) -> str:
    """ActiveState of a service unit from its record and whether its processes live."""
    if not current.get("active"):
        return "failed" if current.get("result") == "failed" else "inactive"
    if alive(current.get("pid"), current.get("pid_start")):
        return "active"
    if alive(current.get("manager"), current.get("manager_start")):
        return "activating"  # starting, or waiting to restart
    return "failed"  # its manager died with it (killed outright)


# -- the manager --------------------------------------------------------------------------------
def _update(node_dir: Path, name: str, **values: Any) -> dict[str, Any]:
    with state.locked(node_dir) as node:
        current: dict[str, Any] = node["units"][name]
        current.update(values)
        return dict(current)


def _record_failure(node_dir: Path, name: str, status: int) -> None:
    _update(node_dir, name, active=False, result="failed", sub="failed", exit_status=status, pid=None)


def _spawn(unit: units.Unit, name: str, log: Any) -> subprocess.Popen[bytes]:
    env = units.environment(unit)
    lines = units.exec_lines(unit, "ExecStart")
    if not lines:
        raise FileNotFoundError(f"{name} has no ExecStart=")
    argv = units.expand_argv(lines[0][1], env)
    return subprocess.Popen(
        argv,
        env=env,
        cwd=units.value(unit, "Service", "WorkingDirectory", "/").lstrip("-") or "/",
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _clean(rc: int) -> bool:
    return rc == 0 or (rc < 0 and -rc in CLEAN_SIGNALS)


def _restart(unit: units.Unit, rc: int, starts: list[float]) -> bool:
    policy = units.value(unit, "Service", "Restart", "no")
    wanted = policy == "always" or (policy == "on-failure" and not _clean(rc))
    burst, window = START_LIMIT
    recent = [t for t in starts if time.monotonic() - t < window]
    return wanted and len(recent) < burst


def manage(node_dir: Path, name: str) -> int:
    path = units.find(name)
    if path is None:
        _record_failure(node_dir, name, 200)
        return 1
    unit = units.load(name, path)
    pid = os.getpid()
    _update(node_dir, name, manager=pid, manager_start=start_time(pid))
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    starts: list[float] = []
    while True:
        starts.append(time.monotonic())
        with open(LOG_DIR / f"{name}.log", "ab") as log:
            try:
                proc = _spawn(unit, name, log)
            except OSError as exc:
                log.write(f"{name}: Failed to execute: {exc}\n".encode())
                _record_failure(node_dir, name, 203)  # systemd's EXIT_EXEC
                return 1
        _update(node_dir, name, pid=proc.pid, pid_start=start_time(proc.pid), sub="running")
        rc = proc.wait()
        current = _update(node_dir, name, pid=None, pid_start=None)
        if current.get("stopping"):
            _update(node_dir, name, active=False, result="success", sub="dead")
            return 0
        if _restart(unit, rc, starts):
            _update(node_dir, name, sub="auto-restart")
            time.sleep(_seconds(units.value(unit, "Service", "RestartSec"), RESTART_S))
            if state.load(node_dir)["units"][name].get("stopping"):
                return 0
            continue
        if _clean(rc):
            _update(node_dir, name, active=False, result="success", sub="dead", exit_status=rc)
        else:
            _record_failure(node_dir, name, rc)
        return 0


if __name__ == "__main__":
    sys.exit(manage(Path(sys.argv[1]), sys.argv[2]))
