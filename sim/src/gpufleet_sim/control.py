"""`gpufleet-sim up|down|status|fault|inventory`: the fleet as seen from the command line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpufleet import procs
from gpufleet_sim import faults, faults_switch, processes, state
from gpufleet_sim.fleet import REBOOT_REQUEST, Fleet, FleetConfig, SimError

_SUPERVISOR = "gpufleet_sim.supervisor"
# The supervisor's own start (a Python process) and its stop of a fleet that did not come up.
SUPERVISOR_START_S = 30.0


def _describe(fleet: Fleet) -> dict[str, Any] | None:
    if not fleet.fleet_file.exists():
        return None
    data: dict[str, Any] = json.loads(fleet.fleet_file.read_text(encoding="utf-8"))
    return data


def _is_supervisor(pid: int) -> bool:
    """The recorded pid is only signalled if it still is our supervisor (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return False
    zombie = any(line.startswith("State:") and "Z" in line for line in status.splitlines())
    return not zombie and _SUPERVISOR.encode() in cmdline


def up(fleet: Fleet, config: FleetConfig, timeout: float | None = None) -> dict[str, Any]:
    """Starts the fleet under a supervisor and waits for it: the fleet's own wait (config.start_wait),
    which names what is still starting when it runs out, and SUPERVISOR_START_S for the supervisor."""
    config.validate()
    if timeout is None:
        timeout = config.start_wait()[0] + SUPERVISOR_START_S
    if _describe(fleet) is not None:
        raise SimError(f"a simulated fleet is already up ({fleet.fleet_file}); run `gpufleet-sim down` first")
    left = processes.survivors(processes.load(fleet.root))
    if left:
        raise SimError(
            f"a simulated fleet under {fleet.root} still runs ({', '.join(left)}); run `gpufleet-sim down`"
        )
    fleet.root.mkdir(parents=True, exist_ok=True)
    log_path = fleet.root / "supervisor.log"
    argv = [sys.executable, "-m", _SUPERVISOR, "--dir", str(fleet.root), "--nodes", str(config.nodes)]
    argv += ["--profile", config.profile, "--subnet", config.subnet, "--port", str(config.port)]
    if config.slurm:
        argv.append("--slurm")
    for leaf in config.sonic_leaves:
        argv += ["--sonic-leaf", leaf]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SimError(
                f"the simulated fleet did not start: {log_path.read_text(encoding='utf-8').strip()}"
            )
        if "ready" in log_path.read_text(encoding="utf-8").split():
            described = _describe(fleet)
            if described is not None:
                return described
        time.sleep(0.1)
    proc.terminate()
    raise SimError(f"the simulated fleet was not ready within {timeout:.0f} s; see {log_path}")


def down(fleet: Fleet, timeout: float = 30.0, grace: float = 10.0, kill_wait: float = 5.0) -> bool:
    """Stops the fleet and verifies that none of it runs; False when there was none.

    The supervisor is asked first (SIGTERM: it stops its nodes and BMCs and waits for them).
    Whatever the record still names afterwards -- the supervisor died, or did not manage, or
    no supervisor owned the fleet -- gets SIGTERM, then SIGKILL: the recorded pids, each node's
    PID namespace, the supervisor's process group (`grace` seconds after SIGTERM, `kill_wait`
    after SIGKILL). Raises SimError naming what survived that
    (the fleet's files are kept, so `sim down` can be run again)."""
    described = _describe(fleet)
    # read before the supervisor removes it: what to verify is what was started
    record = processes.load(fleet.root)
    if described is None and not record:
        return False
    pid = int((described or {}).get("owner", 0))
    if (described or {}).get("managed") and _is_supervisor(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _is_supervisor(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _is_supervisor(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        procs.reap(pid)
    left = processes.stop(record, grace, kill_wait)
    if left:
        raise SimError(
            f"could not stop the simulated fleet under {fleet.root}: still running: {', '.join(left)}"
        )
    with contextlib.suppress(FileNotFoundError):
        fleet.fleet_file.unlink()
    (fleet.root / processes.RECORD_FILE).unlink(missing_ok=True)
    return True


def supervisor_problem(fleet: Fleet) -> str | None:
    """Why a supervised fleet has no supervisor any more (None when it has one, or needs none)."""
    described = _describe(fleet)
    if described is None or not described.get("managed"):
        return None
    pid = int(described.get("owner", 0))
    if _is_supervisor(pid):
        return None
    return f"the fleet supervisor (pid {pid}) is not running (no node can be rebooted)"


def status(fleet: Fleet) -> list[dict[str, Any]]:
    """One row per node; `up` is judged now from the node's recorded processes (its sshd and
    its BMC), `down` says what died (as the supervisor saw it, or that its pid is gone)."""
    described = _describe(fleet)
    if described is None:
        return []
    record = processes.load(fleet.root)
    rows = []
    for name, where in described["nodes"].items():
        node_state = state.load(fleet.node_dir(name))
        is_up, problem = processes.node_health(record, name)
        rows.append(
            {
                "name": name,
                "address": f"{where['address']}:{where['port']}",
                "profile": node_state["profile"],
                "gpus": len(state.present_gpus(node_state)),
                "nics": len(node_state["nics"]),
                "faults": list(node_state["faults"]),
                "up": is_up,
                "down": problem,
            }
        )
    return rows


def fault(fleet: Fleet, node_name: str, name: str | None, clear: bool) -> list[str]:
    if node_name.startswith("leaf"):
        return _leaf_fault(fleet, node_name, name, clear)
    node_dir = fleet.node_dir(node_name)
    if clear:
        return faults.clear(node_dir, name)
    if name is None:
        raise SimError("name a fault to inject, or pass --clear")
    return [name] if faults.inject(node_dir, name) else []


def _leaf_fault(fleet: Fleet, leaf: str, name: str | None, clear: bool) -> list[str]:
    path = fleet.leaf_state(leaf)
    try:
        if clear:
            return faults_switch.clear_leaf(path, name)
        if name is None:
            raise SimError("name a fault to inject, or pass --clear")
        return [name] if faults_switch.inject_leaf(path, name) else []
    except faults_switch.LeafFaultError as exc:
        raise SimError(str(exc)) from None


def reboot(fleet: Fleet, node_name: str, timeout: float = 60.0) -> None:
    """Asks the supervisor to reboot a node and waits until it is reachable again."""
    described = _describe(fleet)
    if described is None:
        raise SimError("no simulated fleet is up")
    if not described.get("managed"):
        raise SimError("this fleet is owned by a test process: call Fleet.reboot() there")
    request = fleet.node_dir(node_name) / REBOOT_REQUEST
    done = request.with_suffix(".done")
    done.unlink(missing_ok=True)
    request.write_text("reboot", encoding="utf-8")
    deadline = time.monotonic() + timeout
    while not done.exists():
        problem = supervisor_problem(fleet)
        if problem is not None:
            request.unlink(missing_ok=True)
            raise SimError(f"cannot reboot {node_name}: {problem}; run `gpufleet-sim down`, then `up`")
        if time.monotonic() > deadline:
            raise SimError(f"{node_name} did not come back within {timeout:.0f} s")
        time.sleep(0.1)
    answer = done.read_text(encoding="utf-8")
    done.unlink()
    if answer != "ok":
        raise SimError(f"{node_name}: {answer}")
