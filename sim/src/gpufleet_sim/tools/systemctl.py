"""A node's `systemctl`, enough for ansible.builtin.systemd_service and boot-time units.

Unit state (enabled, active) lives in the node state under "units". Starting a oneshot or
forking unit runs its ExecStart lines in the node, so a boot unit really re-applies what it
says it does; a simple/exec service really runs (gpufleet_sim.tools.systemd_service), and
is-active follows its process. Template instances (name@instance), specifiers, Environment=,
EnvironmentFile= and Condition*/Assert* path checks are honoured. `systemctl __boot` (the
simulator's reboot) starts every enabled unit in order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from gpufleet_sim import state
from gpufleet_sim.tools import systemd_service as service
from gpufleet_sim.tools import systemd_units as units

_OPTIONS = {
    "--no-block",
    "--force",
    "--system",
    "--no-pager",
    "--quiet",
    "-q",
    "-l",
    "--full",
    "--no-ask-password",
}


def _unit_state(node: state.State, name: str) -> dict[str, Any]:
    known: dict[str, Any] = node.setdefault("units", {}).setdefault(name, {"enabled": False, "active": False})
    return known


def _kind(unit: units.Unit) -> str:
    return units.value(unit, "Service", "Type", "simple")


def _active_word(current: dict[str, Any], unit: units.Unit) -> str:
    if unit and _kind(unit) in service.SERVICE_TYPES and units.exec_lines(unit, "ExecStart"):
        return service.active_state(current)
    if current.get("result") == "failed":
        return "failed"
    return "active" if current["active"] else "inactive"


def _show(node: state.State, name: str) -> int:
    path = units.find(name)
    current = _unit_state(node, name) if path else {"enabled": False, "active": False}
    unit = units.load(name, path) if path else {}
    has_install = bool(unit.get("Install"))
    file_state = ("enabled" if current["enabled"] else "disabled") if has_install else "static"
    active = _active_word(current, unit)
    running = active == "active" and service.alive(current.get("pid"), current.get("pid_start"))
    props = {
        "Type": _kind(unit),
        "Restart": units.value(unit, "Service", "Restart", "no"),
        "Result": "exit-code" if active == "failed" else "success",
        "Id": name,
        "Names": name,
        "Description": units.value(unit, "Unit", "Description", name),
        "LoadState": "loaded" if path else "not-found",
        "ActiveState": active,
        "SubState": {
            "active": "exited" if _kind(unit) == "oneshot" else "running",
            "activating": "auto-restart" if current.get("sub") == "auto-restart" else "start",
            "inactive": "dead",
            "failed": "failed",
        }[active],
        "FragmentPath": str(path) if path else "",
        "UnitFileState": file_state if path else "",
        "UnitFilePreset": "enabled" if path else "",
        "After": " ".join(units.words(unit, "Unit", "After")),
        "Before": " ".join(units.words(unit, "Unit", "Before")),
        "MainPID": str(current.get("pid") or 0) if running else "0",
        "ConditionResult": "no" if current.get("condition") is False else "yes",
        "ExecMainStatus": str(current.get("exit_status") or 1) if active == "failed" else "0",
    }
    print("\n".join(f"{k}={v}" for k, v in props.items()))
    return 0


def _run_exec(unit: units.Unit, key: str) -> bool:
    try:
        env = units.environment(unit)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return False
    for ignore, words in units.exec_lines(unit, key):
        try:
            argv = units.expand_argv(words, env)
            rc = subprocess.run(argv, stdin=subprocess.DEVNULL, env=env, check=False).returncode
        except OSError:
            rc = 203  # systemd's EXEC status: the binary could not be run
        if rc != 0 and not ignore:
            return False
    return True


def _mark(node_dir: Path, name: str, **values: Any) -> None:
    with state.locked(node_dir) as node:
        _unit_state(node, name).update(values)


def _start(node_dir: Path, name: str, path: Path) -> bool:
    unit = units.load(name, path)
    if not units.conditions_hold(unit):
        # skipped, as systemd does: no error, the unit stays inactive
        _mark(node_dir, name, active=False, result="success", condition=False)
        return True
    if not units.asserts_hold(unit):
        _mark(node_dir, name, active=False, result="failed", condition=True)
        return False
    kind = _kind(unit)
    if kind in service.SERVICE_TYPES and units.exec_lines(unit, "ExecStart"):
        ok = _run_exec(unit, "ExecStartPre") and service.launch(node_dir, name)
        if ok:
            _run_exec(unit, "ExecStartPost")
        else:
            _mark(node_dir, name, active=False, result="failed", condition=True)
        return ok
    # oneshot/forking ones run to completion; a simple unit with nothing to run is only marked
    ok = _run_exec(unit, "ExecStartPre") and (
        kind not in ("oneshot", "forking") or _run_exec(unit, "ExecStart")
    )
    _mark(
        node_dir,
        name,
        active=ok and (kind != "oneshot" or units.value(unit, "Service", "RemainAfterExit") == "yes"),
        result="success" if ok else "failed",
        condition=True,
    )
    return ok


def _stop(node_dir: Path, name: str, path: Path) -> None:
    unit = units.load(name, path)
    _run_exec(unit, "ExecStop")
    if _kind(unit) in service.SERVICE_TYPES and units.exec_lines(unit, "ExecStart"):
        service.stop(node_dir, name, unit)
    _run_exec(unit, "ExecStopPost")
    _mark(node_dir, name, active=False, result="success")


def _enable(node_dir: Path, name: str, enabled: bool) -> None:
    with state.locked(node_dir) as node:
        _unit_state(node, name)["enabled"] = enabled
    if enabled:
        print(
            f"Created symlink /etc/systemd/system/multi-user.target.wants/{name} → {units.find(name)}.",
            file=sys.stderr,
        )
    else:
        print(f'Removed "/etc/systemd/system/multi-user.target.wants/{name}".', file=sys.stderr)


def _boot(node_dir: Path) -> int:
    with state.locked(node_dir) as node:
        known = node.setdefault("units", {})
        for current in known.values():
            current["active"] = False
            for key in ("result", "pid", "pid_start", "stopping", "sub", "manager", "manager_start"):
                current.pop(key, None)
        found = {n: p for n, s in known.items() if s.get("enabled") and (p := units.find(n))}
    parsed = {n: units.load(n, p) for n, p in found.items()}
    for name in units.boot_order(list(found), parsed):
        _start(node_dir, name, found[name])
    return 0


def _list_unit_files(pattern: str | None) -> int:
    import fnmatch

    names = sorted(n for n in units.all_units() if pattern is None or fnmatch.fnmatch(n, pattern))
    print(f"{'UNIT FILE':<40} {'STATE':<9} PRESET")
    for name in names:
        print(f"{name:<40} {'disabled':<9} enabled")
    print(f"\n{len(names)} unit files listed.")
    return 0


# Verbs that only read the unit's state: the node's tool server may answer them (toolserver). The
# others start or stop processes, whose tree is part of what they simulate: the caller runs those.
READ_ONLY_VERBS = frozenset({"show", "is-enabled", "is-active", "list-unit-files", "daemon-reload"})


def _args(argv: list[str]) -> list[str]:
    """The verb and unit names, without the options that change nothing here."""
    return [a for a in argv if a not in _OPTIONS]


def served(argv: list[str]) -> bool:
    args = _args(argv)
    return bool(args) and args[0] in READ_ONLY_VERBS


def main(argv: list[str], node_dir: Path) -> int:
    args = _args(argv)
    if not args:
        print("systemctl: no command given (the simulated systemd does not list units)", file=sys.stderr)
        return 1
    verb, names = args[0], [units.unit_name(a) for a in args[1:]]
    if verb == "__boot":
        return _boot(node_dir)
    if verb in ("daemon-reload", "daemon-reexec"):
        return 0
    if verb == "list-unit-files":
        return _list_unit_files(args[1] if len(args) > 1 else None)
    if verb == "show":
        node = state.load(node_dir)
        return max((_show(node, n) for n in names), default=0)
    rc = 0
    for name in names:
        path = units.find(name)
        node = state.load(node_dir)
        current = _unit_state(node, name)
        if verb == "is-enabled":
            if path is None:
                print(f"Failed to get unit file state for {name}: No such file or directory", file=sys.stderr)
                rc = 1
            elif not units.parse(path).get("Install"):
                print("static")
            else:
                print("enabled" if current["enabled"] else "disabled")
                rc = rc or (0 if current["enabled"] else 1)
        elif verb == "is-active":
            active = _active_word(current, units.load(name, path) if path else {})
            print(active)
            rc = rc or (0 if active == "active" else 3)
        elif path is None:
            print(f"Failed to {verb} unit: Unit file {name} does not exist.", file=sys.stderr)
            rc = 5 if verb in ("start", "stop", "restart", "reload") else 1
        elif verb in ("enable", "disable"):
            _enable(node_dir, name, verb == "enable")
        elif verb in ("start", "restart", "reload", "reload-or-restart", "try-restart"):
            running = _active_word(current, units.load(name, path)) in ("active", "activating")
            if verb == "try-restart" and not running:
                continue
            if verb == "start" and running:
                continue  # starting an active unit is a no-op
            if running:
                _stop(node_dir, name, path)
            if not _start(node_dir, name, path):
                print(
                    f"Job for {name} failed because the control process exited with error code.\n"
                    f'See "systemctl status {name}" and "journalctl -xeu {name}" for details.',
                    file=sys.stderr,
                )
                rc = 1
        elif verb == "stop":
            _stop(node_dir, name, path)
        else:
            print(f"Unknown command verb {verb}.", file=sys.stderr)
            return 1
    return rc
