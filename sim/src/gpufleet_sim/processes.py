"""What a simulated fleet started, recorded on disk, and how it is stopped for certain.

The fleet writes `processes.json` whenever it starts or loses a process: for each node its
`unshare` (the host-side parent), the node's PID 1 (its sshd), the node's tool server, its
PID namespace and its BMC, each pid with its start time (pids get reused: a recorded pid is
only ours while its start time matches). `gpufleet-sim status` reads it to tell a dead node
from a live one; `gpufleet-sim down` reads it to stop whatever is left when the supervisor is
gone or did not manage, and to verify that nothing is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD_FILE = "processes.json"
# A node's parts in the order they are reported; "unshare" is the host-side parent of the node.
NODE_PARTS = ("sshd", "toolserver", "unshare", "bmc")
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class Proc:
    """One process the fleet started: its pid and its start time (in clock ticks since boot)."""

    pid: int
    start: int

    def as_dict(self) -> dict[str, int]:
        return {"pid": self.pid, "start": self.start}


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (the state letter first), None when there is
    no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time) of a process, None when there is no such process."""
    fields = _stat_fields(pid)
    return None if fields is None else (fields[0], int(fields[19]))


def identify(pid: int) -> Proc | None:
    found = _stat(pid)
    return None if found is None else Proc(pid, found[1])


def alive(proc: Proc) -> bool:
    """The very process that was recorded still runs (a zombie has stopped, and listens on nothing)."""
    found = _stat(proc.pid)
    return found is not None and found[1] == proc.start and found[0] not in "ZX"


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="utf-8")
    except OSError:
        return []
    return [int(p) for p in text.split()]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def pid_namespace(pid: int) -> str | None:
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/ns/pid")
    return None


def _live(match: Callable[[int, list[str]], bool]) -> list[int]:
    """Every live process (neither zombie nor dead) for which ``match(pid, stat fields)`` holds."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        fields = _stat_fields(pid)
        if fields is not None and fields[0] not in "ZX" and match(pid, fields):
            found.append(pid)
    return found


def in_namespace(namespace: str) -> list[int]:
    """Every live process in a PID namespace (a node's sessions, tools, vLLM stand-ins)."""
    return _live(lambda pid, _fields: pid_namespace(pid) == namespace)


def in_group(pgid: int) -> list[int]:
    """Every live process in a process group (the stat field after the parent's pid)."""
    return _live(lambda _pid, fields: int(fields[2]) == pgid)


def listeners(addresses: list[str]) -> list[str]:
    """`address:port` of every TCP socket listening on one of these IPv4 addresses."""
    wanted = set(addresses)
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _TCP_LISTEN:
                continue
            hex_address, hex_port = fields[1].split(":")
            address = ".".join(str(b) for b in reversed(bytes.fromhex(hex_address)))
            if address in wanted:
                found.append(f"{address}:{int(hex_port, 16)}")
    return sorted(found)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


# -- the record ----------------------------------------------------------------
def load(root: Path) -> dict[str, Any]:
    """The fleet's record; an empty one when there is none (or it cannot be read)."""
    try:
        data: dict[str, Any] = json.loads((root / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data


def save(root: Path, record: dict[str, Any]) -> None:
    """Replaces the record in one rename: a reader never sees half of it."""
    path = root / RECORD_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    partial.replace(path)


def _proc(entry: Any) -> Proc | None:
    if isinstance(entry, dict) and "pid" in entry and "start" in entry:
        return Proc(int(entry["pid"]), int(entry["start"]))
    return None


def recorded(record: dict[str, Any]) -> list[tuple[str, Proc]]:
    """('node01 sshd', Proc) for every process in the record, the supervisor last."""
    found = []
    for name, parts in sorted(record.get("nodes", {}).items()):
        for part in NODE_PARTS:
            proc = _proc(parts.get(part))
            if proc is not None:
                found.append((f"{name} {part}", proc))
    for name, parts in sorted(record.get("leaves", {}).items()):
        for service in ("nvue", "sonic"):
            proc = _proc(parts.get(service))
            if proc is not None:
                found.append((f"{name} {service}", proc))
    for label, entry in sorted(record.get("slurm", {}).items()):
        proc = _proc(entry)
        if proc is not None:
            found.append((f"slurm {label}", proc))
    supervisor = _proc(record.get("supervisor"))
    if supervisor is not None:
        found.append(("supervisor", supervisor))
    return found


def node_health(record: dict[str, Any], name: str) -> tuple[bool, str]:
    """(up, what is down) of one node, judged now from its recorded processes."""
    parts = record.get("nodes", {}).get(name)
    if parts is None:
        return False, "no process recorded"
    problems = []
    sshd = _proc(parts.get("sshd"))
    if sshd is None or not alive(sshd):
        reason = parts.get("down") or (f"sshd (pid {sshd.pid}) is gone" if sshd else "sshd never started")
        problems.append(reason)
    bmc = _proc(parts.get("bmc"))
    if bmc is None or not alive(bmc):
        problems.append(parts.get("bmc_down") or (f"bmc (pid {bmc.pid}) is gone" if bmc else "no bmc"))
    return not problems, "; ".join(problems)


# -- stopping ------------------------------------------------------------------
def terminate_all(procs: list[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """Stops processes this one started, by their handles: SIGTERM to every one still running, then
    up to ``grace`` seconds each to exit before SIGKILL; each is waited for (no zombie left)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _namespace_members(parts: dict[str, Any]) -> list[int]:
    """The live processes of a node's PID namespace. Only while its recorded PID 1 runs is the
    namespace surely the node's (namespace ids are reused); once PID 1 is gone the kernel has
    sent every other member SIGKILL."""
    init = _proc(parts.get("sshd"))
    namespace = parts.get("pidns")
    if init is None or not namespace or not alive(init) or pid_namespace(init.pid) != namespace:
        return []
    return in_namespace(namespace)


def survivors(record: dict[str, Any], own_group: int | None = None) -> list[str]:
    """What is still running of a recorded fleet, named: recorded processes, anything left in a
    node's PID namespace or the supervisor's process group, and listeners on the fleet's addresses."""
    found = [f"{label} (pid {proc.pid})" for label, proc in recorded(record) if alive(proc)]
    for name, parts in sorted(record.get("nodes", {}).items()):
        found += [f"{name} process {pid} in {parts['pidns']}" for pid in _namespace_members(parts)]
    group = record.get("group")
    if group and group != own_group:
        found += [f"process {pid} in the supervisor's group {group}" for pid in in_group(int(group))]
    addresses = [
        parts["address"]
        for section in ("nodes", "leaves")
        for parts in record.get(section, {}).values()
        if "address" in parts
    ]
    found += [f"a listener on {where}" for where in listeners(addresses)]
    return list(dict.fromkeys(found))


def _kill_everything(record: dict[str, Any], sig: signal.Signals, own_group: int | None) -> None:
    for _, proc in recorded(record):
        if alive(proc):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)
    for parts in record.get("nodes", {}).values():
        for pid in _namespace_members(parts):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
    group = record.get("group")
    # A process group id is never handed out again while the group has a member: it is ours.
    if group and group != own_group and in_group(int(group)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(group), sig)


def stop(record: dict[str, Any], grace: float = 10.0, kill_wait: float = 5.0) -> list[str]:
    """Stops everything the record names: SIGTERM, up to `grace` seconds, then SIGKILL (the node's
    `unshare` takes its whole PID namespace with it) and up to `kill_wait` seconds for the kernel
    to finish. Returns what still runs after that."""
    own_group = os.getpgrp()
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, kill_wait)):
        if not survivors(record, own_group):
            return []
        _kill_everything(record, sig, own_group)
        deadline = time.monotonic() + wait
        while survivors(record, own_group) and time.monotonic() < deadline:
            time.sleep(0.05)
    return survivors(record, own_group)
