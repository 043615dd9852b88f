"""The simulated fleet: starts, checks, describes and stops its nodes, their BMCs and their leaves.

A Fleet object owns its node processes and waits on them (PID 1 on these machines does not
reap orphans). `gpufleet-sim up` runs one inside a detached supervisor; tests use it directly.
Each node's BMC is a process of its own, started and stopped with the node but left running
when the host reboots, as a real BMC is. Every process it starts is recorded (`processes.py`)
so that `gpufleet-sim status` and `gpufleet-sim down` know them without asking the Fleet.
The leaf switches (a pair per 16 nodes, build.py's cabling) are NVUE HTTPS services (sim/nvue.py),
each on its own loopback address (.211 up) and port 8765, with their own CA under leaves/; a leaf
named in ``sonic_leaves`` is a SONiC one instead (sim/sonic.py: sshd with a fake sonic-cfggen on the
fleet's SSH port, from the same state file).
With `slurm`, a real Slurm cluster (sim/slurm.py) holds the nodes, its daemons started and stopped
with the fleet.
A node is reset through requests left in its directory (node_power.REBOOT_REQUEST: `gpufleet-sim
reboot`, a Redfish ComputerSystem.Reset to its BMC); service_requests carries them out, called by the
supervisor's loop, or for a test-owned fleet by a thread Fleet.up starts and Fleet.stop ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import paramiko
import yaml

from gpufleet_sim import boot, build, node, node_power, nvue, processes, slurm, sonic, state, toolclient
from gpufleet_sim.bmc import launch, vault

REPO_DIR = Path(__file__).resolve().parents[3]
DEFAULT_DIR = REPO_DIR / ".gpufleet" / "sim"
GROUP_VARS = REPO_DIR / "inventory" / "sim" / "group_vars"
_PR_SET_PDEATHSIG = 1
# Leaf N listens on <subnet>.(LEAF_BASE + N): above every node address (nodes are .2 to .201).
LEAF_BASE = 210
# `gpufleet-sim reboot` and a node's BMC leave this file in a node directory for the fleet's owner.
REBOOT_REQUEST = node_power.REBOOT_REQUEST
# How often a test-owned fleet's thread looks for requests (the supervisor's loop looks as often).
REQUEST_POLL_S = 0.2
# A reset's wait for the node to answer SSH again.
RESET_WAIT_S = 30.0
# How long a fleet may take to come up, from Fleet.up's start to every node, BMC and leaf answering:
# a fixed part (the client key, the tool client's build with cc, the leaves) and a part per node (its
# files and host key, then its sshd, BMC and tool server: CPU work, node after node, so the time grows
# with the count). 12 nodes on a loaded 2-core machine took a little over 60 s, about 5 s a node: 8 s
# a node leaves that room to spare. The fixed part is what one stage alone had before (30 s) and half
# again, so a small fleet in a loaded `make test` is given no less than it was; a quicker machine ends
# the wait sooner.
START_BASE_S = 45.0
START_PER_NODE_S = 8.0
# Slurm's daemons (munged, slurmctld, a slurmd per node) and every node's registration.
START_SLURM_S = 30.0


def _die_with_parent(sig: signal.Signals) -> None:
    """Nothing outlives its owner: if the harness dies, the kernel sends its children `sig`."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _node_dies_with_parent() -> None:
    # SIGKILL: `unshare --fork` ignores SIGTERM while it waits, and a node left behind keeps
    # its address; unshare --kill-child then takes the node's PID namespace with it.
    _die_with_parent(signal.SIGKILL)


def _bmc_dies_with_parent() -> None:
    _die_with_parent(signal.SIGTERM)


class SimError(RuntimeError):
    """The fleet could not be started, reached or described."""


@dataclass(frozen=True)
class StartWait:
    """One deadline for a whole start, and how long it is and why (said when it runs out)."""

    allowed: float
    why: str
    ends: float

    @classmethod
    def of(cls, allowed: float, why: str) -> StartWait:
        return cls(allowed, why, time.monotonic() + allowed)

    def passed(self) -> bool:
        return time.monotonic() > self.ends

    def left(self) -> float:
        return max(self.ends - time.monotonic(), 0.0)


# A part of the fleet being waited for: None once it answers, else what it answered last.
Probe = Callable[[], str | None]


def wait_for(what: str, probes: dict[str, Probe], wait: StartWait) -> None:
    """Polls every part still starting until each probe says ready (None); a probe raises SimError
    when its process is gone. When the wait runs out, names each part still starting and why."""
    pending = dict(probes)
    last: dict[str, str] = {}
    while pending:
        for name, probe in list(pending.items()):
            answer = probe()
            if answer is None:
                del pending[name]
            else:
                last[name] = answer
        if not pending:
            return
        if wait.passed():
            starting = "; ".join(f"{name} ({last[name]})" for name in pending)
            raise SimError(
                f"{what}: {len(pending)} of {len(probes)} still starting after {wait.allowed:.0f} s "
                f"({wait.why}): {starting}"
            )
        time.sleep(0.05)


@dataclass(frozen=True)
class LeafSpec:
    name: str
    address: str
    state_path: Path
    # "cumulus" (NVUE over HTTPS) or "sonic" (sonic-cfggen over SSH on ``port``)
    os: str = "cumulus"
    port: int = 0


@dataclass(frozen=True)
class FleetConfig:
    nodes: int = 2
    profile: str = "b300-16"
    subnet: str = "127.0.1"
    port: int = 2222
    # a real Slurm cluster (Debian's slurmctld, slurmd, munge) instead of the fake scontrol
    slurm: bool = False
    # leaves that run SONiC (read over SSH with sonic-cfggen) instead of Cumulus Linux (NVUE)
    sonic_leaves: tuple[str, ...] = ()

    def start_wait(self) -> tuple[float, str]:
        """How long this fleet may take to come up (START_BASE_S, START_PER_NODE_S), and the sum."""
        allowed = START_BASE_S + START_PER_NODE_S * self.nodes + (START_SLURM_S if self.slurm else 0.0)
        why = f"{START_BASE_S:g} s + {START_PER_NODE_S:g} s per node for {self.nodes}"
        return allowed, why + (f" + {START_SLURM_S:g} s for Slurm" if self.slurm else "")

    def validate(self) -> None:
        if not 1 <= self.nodes <= 200:
            raise SimError(f"--nodes must be between 1 and 200, got {self.nodes}")
        build.load_profile(self.profile)
        parts = self.subnet.split(".")
        if len(parts) != 3 or parts[0] != "127" or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
            raise SimError(f"--subnet must be a loopback /24 such as 127.0.1, got {self.subnet!r}")
        leaves = [build.leaf_name(n) for n in range(1, build.leaf_count(self.nodes) + 1)]
        unknown = sorted(set(self.sonic_leaves) - set(leaves))
        if unknown:
            raise SimError(
                f"--sonic-leaf names {', '.join(unknown)}, not a leaf of {self.nodes} node(s) "
                f"(its leaves: {', '.join(leaves)})"
            )


class _UnderRoot:
    """A path of the fleet's, read as an attribute (``fleet.ssh_dir``): ``parts`` under its root."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, fleet: Fleet, owner: type[Fleet] | None = None) -> Path:
        return fleet.root.joinpath(*self.parts)

    def __set__(self, fleet: Fleet, value: Path) -> None:
        raise AttributeError("a fleet's paths follow its root")


class Fleet:
    def __init__(self, root: Path = DEFAULT_DIR) -> None:
        self.root = root
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.bmcs: dict[str, subprocess.Popen[bytes]] = {}
        self.leaves: dict[str, subprocess.Popen[bytes]] = {}
        self.slurm_daemons: dict[str, subprocess.Popen[bytes]] = {}
        # what processes.json says: every process started, and why a node or BMC is down
        self.record: dict[str, Any] = {"nodes": {}}
        # one reset, reboot or stop at a time (a test-owned fleet's request thread and the test)
        self._lock = threading.RLock()
        self._servicer: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- layout -----------------------------------------------------------
    inventory_path = _UnderRoot("inventory.yml")
    ssh_dir = _UnderRoot("ssh")
    client_key = _UnderRoot("ssh", "id_ed25519")
    known_hosts = _UnderRoot("ssh", "known_hosts")
    fleet_file = _UnderRoot("fleet.json")
    # the fleet's BMC CA (ca.pem, which clients verify against) and each BMC's certificate
    bmc_dir = _UnderRoot("bmc")
    # decrypts the inventory's vaulted BMC passwords (ansible-playbook --vault-password-file)
    vault_password_file = _UnderRoot("vault-password")
    # the leaves' state files (<leaf>.json), their CA (ca.pem) and certificates
    leaf_dir = _UnderRoot("leaves")

    def leaf_state(self, name: str) -> Path:
        path = nvue.state_file(self.leaf_dir, name)
        if not path.exists():
            raise SimError(f"no simulated leaf {name!r} under {self.root}")
        return path

    def leaf_specs(self, config: FleetConfig) -> list[LeafSpec]:
        return [
            LeafSpec(
                name=build.leaf_name(n),
                address=f"{config.subnet}.{LEAF_BASE + n}",
                state_path=nvue.state_file(self.leaf_dir, build.leaf_name(n)),
                os=sonic.OS if build.leaf_name(n) in config.sonic_leaves else "cumulus",
                port=config.port,
            )
            for n in range(1, build.leaf_count(config.nodes) + 1)
        ]

    @property
    def slurm(self) -> slurm.SlurmCluster:
        """The fleet's real Slurm cluster (there only for a fleet started with ``slurm``)."""
        return slurm.SlurmCluster(self.root / "slurm")

    def node_dir(self, name: str) -> Path:
        directory = self.root / "nodes" / name
        if not (directory / "state.json").exists():
            raise SimError(f"no simulated node {name!r} under {self.root}")
        return directory

    def specs(self, config: FleetConfig) -> list[node.NodeSpec]:
        return [
            node.NodeSpec(
                name=f"node{i:02d}",
                index=i,
                address=f"{config.subnet}.{i + 1}",
                port=config.port,
                profile=config.profile,
                directory=self.root / "nodes" / f"node{i:02d}",
            )
            for i in range(1, config.nodes + 1)
        ]

    # -- lifecycle --------------------------------------------------------
    def up(
        self, config: FleetConfig, timeout: float | None = None, managed: bool = False
    ) -> list[node.NodeSpec]:
        """Starts the nodes, all answering within ``timeout`` (config.start_wait() when None);
        managed=True when a supervisor owns them (sim down may signal it)."""
        config.validate()
        allowed, why = config.start_wait()
        wait = StartWait.of(allowed, why) if timeout is None else StartWait.of(timeout, "as asked")
        if self.fleet_file.exists():
            raise SimError(
                f"a simulated fleet is already described in {self.fleet_file}; run `gpufleet-sim down`"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self._client_key()
        authorized = (self.client_key.with_suffix(".pub")).read_text(encoding="utf-8")
        specs = self.specs(config)
        leaves = self.leaf_specs(config)
        bmc_passwords: dict[str, str] = {}
        leaf_passwords: dict[str, str] = {}
        self.record = {
            "nodes": {s.name: {"address": s.address} for s in specs},
            "leaves": {leaf.name: {"address": leaf.address} for leaf in leaves},
        }
        if managed:
            # `sim down` falls back to the supervisor's process group (it leads its own session)
            self.record["supervisor"] = processes.Proc(os.getpid(), _start_time(os.getpid())).as_dict()
            if os.getpgrp() == os.getpid():
                self.record["group"] = os.getpid()
        self._save_record()
        try:
            client = toolclient.build(self.root)
            for spec in specs:
                node.prepare(spec, authorized, client)
                bmc_passwords[spec.name] = launch.prepare(
                    self.bmc_dir, spec.name, spec.address, spec.directory
                )
            for leaf in leaves:
                leaf_passwords[leaf.name] = nvue.prepare(
                    self.leaf_dir, leaf.name, leaf.address, ports=build.LEAF_PORTS
                )
                if leaf.os == sonic.OS:
                    sonic.prepare(self.leaf_dir, leaf.name, leaf.address, leaf.port, authorized)
            if config.slurm:
                self._prepare_slurm(specs)
            self._write_known_hosts(specs, leaves)
            for leaf in leaves:
                self._start_leaf(leaf)
            if config.slurm:
                self._start_slurm(specs, wait)
            for spec in specs:
                self._start_bmc(spec)
                self._start_node(spec)
            self._wait_ready(specs, wait)
            self._wait_bmcs(specs, wait)
            self._wait_leaves(leaves, wait)
            if config.slurm:
                self.slurm.wait_idle([s.name for s in specs], wait.left())
        except slurm.SlurmError as exc:
            self.stop()
            raise SimError(str(exc)) from exc
        except BaseException:
            self.stop()
            raise
        self._write_inventory(specs, bmc_passwords, leaves, leaf_passwords)
        self.fleet_file.write_text(
            json.dumps(
                {
                    "config": config.__dict__,
                    "owner": os.getpid(),
                    "managed": managed,
                    "nodes": {s.name: {"address": s.address, "port": s.port} for s in specs},
                },
                indent=1,
            ),
            encoding="utf-8",
        )
        if not managed:
            self._serve_requests()
        return specs

    def _save_record(self) -> None:
        processes.save(self.root, self.record)

    def _start_node(self, spec: node.NodeSpec) -> None:
        proc, started = _spawn(node.launch_argv(spec), spec.directory / "sshd.log", _node_dies_with_parent)
        self.processes[spec.name] = proc
        parts = self.record["nodes"].setdefault(spec.name, {"address": spec.address})
        for stale in ("sshd", "toolserver", "pidns", "down"):
            parts.pop(stale, None)
        parts["unshare"] = started
        self._save_record()

    def _record_inside(self, spec: node.NodeSpec) -> None:
        """Once a node answers: its PID 1 (sshd), its PID namespace and its tool server."""
        parts = self.record["nodes"][spec.name]
        for init in processes.children(self.processes[spec.name].pid):
            found = processes.identify(init)
            if found is None:
                continue
            parts["sshd"] = found.as_dict()
            parts["pidns"] = processes.pid_namespace(init)
            for child in processes.children(init):
                server = processes.identify(child)
                if server is not None and b"gpufleet_sim.toolserver" in processes.cmdline(child):
                    parts["toolserver"] = server.as_dict()
        self._save_record()

    def _start_bmc(self, spec: node.NodeSpec) -> None:
        argv = launch.argv(self.bmc_dir, spec.name, spec.address, spec.directory)
        proc, started = _spawn(argv, spec.directory / "bmc.log", _bmc_dies_with_parent)
        self.bmcs[spec.name] = proc
        parts = self.record["nodes"].setdefault(spec.name, {"address": spec.address})
        parts.pop("bmc_down", None)
        parts["bmc"] = started
        self._save_record()

    def _wait_bmcs(self, specs: list[node.NodeSpec], wait: StartWait) -> None:
        def probe(spec: node.NodeSpec) -> str | None:
            if launch.listening(spec.address):
                return None
            if self.bmcs[spec.name].poll() is not None:
                log = (spec.directory / "bmc.log").read_text(encoding="utf-8", errors="replace")
                raise SimError(
                    f"the BMC of {spec.name} at {spec.address}:{launch.PORT} did not start: {log[-400:]}"
                )
            return f"BMC {spec.address}:{launch.PORT} not listening yet"

        wait_for("BMCs", {s.name: partial(probe, s) for s in specs}, wait)

    def _start_leaf(self, leaf: LeafSpec) -> None:
        if leaf.os == sonic.OS:
            argv = sonic.argv(self.leaf_dir, leaf.name)
        else:
            argv = nvue.argv(self.leaf_dir, leaf.name, leaf.address)
        proc, started = _spawn(argv, self.leaf_dir / f"{leaf.name}.log", _bmc_dies_with_parent)
        self.leaves[leaf.name] = proc
        # processes.py names the leaf's process by its service: nvue, or sonic (it runs the sshd)
        self.record["leaves"][leaf.name]["sonic" if leaf.os == sonic.OS else "nvue"] = started
        self._save_record()

    def _wait_leaves(self, leaves: list[LeafSpec], wait: StartWait) -> None:
        def probe(leaf: LeafSpec) -> str | None:
            port, service = (leaf.port, "SSH") if leaf.os == sonic.OS else (nvue.PORT, "NVUE")
            if nvue.listening(leaf.address, port):
                return None
            where = f"{leaf.address}:{port}"
            if self.leaves[leaf.name].poll() is not None:
                log = (self.leaf_dir / f"{leaf.name}.log").read_text(encoding="utf-8", errors="replace")
                raise SimError(f"leaf {leaf.name} at {where} did not start: {log[-400:]}")
            return f"{service} {where} not listening yet"

        wait_for("leaf switches", {leaf.name: partial(probe, leaf) for leaf in leaves}, wait)

    def _prepare_slurm(self, specs: list[node.NodeSpec]) -> None:
        """The cluster's files, and on each node its slurm.conf in place of the fake scontrol."""
        cluster = self.slurm
        cluster.prepare([(s.name, s.address) for s in specs])
        for spec in specs:
            node.tool_path(spec.directory, "scontrol").unlink()
            (spec.directory / "tools-py" / "scontrol").unlink(missing_ok=True)
            conf = spec.directory / "etc-upper" / slurm.NODE_CONF.relative_to("etc")
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_bytes(cluster.conf.read_bytes())

    def _start_slurm(self, specs: list[node.NodeSpec], wait: StartWait) -> None:
        """munged first (slurmctld authenticates through it), then slurmctld and a slurmd per node."""
        cluster = self.slurm
        self.record["slurm"] = {}
        self._start_daemon("munged", cluster.munged_argv())
        cluster.wait_munge(wait.left())
        self._start_daemon("slurmctld", cluster.controller_argv())
        for spec in specs:
            self._start_daemon(f"slurmd {spec.name}", cluster.slurmd_argv(spec.name))

    def _start_daemon(self, label: str, argv: list[str]) -> None:
        log_name = label.replace(" ", "-") + ".out"
        proc, started = _spawn(argv, self.slurm.root / "log" / log_name, _bmc_dies_with_parent)
        self.slurm_daemons[label] = proc
        self.record["slurm"][label] = started
        self._save_record()

    def _stop_daemons(self) -> None:
        """The BMCs, the leaves and the Slurm daemons."""
        processes.terminate_all([*self.bmcs.values(), *self.leaves.values(), *self.slurm_daemons.values()])
        self.bmcs.clear()
        self.leaves.clear()
        self.slurm_daemons.clear()

    def _stop_nodes(self, names: list[str]) -> None:
        """Stops these nodes (a node that already died is only waited for)."""
        procs = [self.processes[n] for n in names if n in self.processes]
        for proc in procs:
            if proc.poll() is None:
                # Stop the namespace's PID 1 (sshd) first: unshare reaps it, and the kernel
                # has reaped every session in the namespace before that wait returns. SIGCONT: a
                # hung node's sshd (node-hung, stopped) acts on its SIGTERM once continued.
                for child in processes.children(proc.pid) or [proc.pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGTERM)
                        os.kill(child, signal.SIGCONT)
        deadline = time.monotonic() + 10
        for proc in procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> list[str]:
        """Kills every node (its PID namespace goes with it) and every BMC, waits for each, then
        makes sure from the record that nothing is left (SIGKILL for what is). Returns what
        could not be stopped; the fleet's files stay then, for `gpufleet-sim down` to try again."""
        self._stopping.set()
        if self._servicer is not None:
            self._servicer.join()  # a reset under way finishes first (within its own wait)
            self._servicer = None
        with self._lock:
            return self._stop_all()

    def _stop_all(self) -> list[str]:
        self._stop_nodes(list(self.processes))
        self.processes.clear()
        self._stop_daemons()
        # the supervisor running this is no leftover of its own fleet
        record = {key: value for key, value in self.record.items() if key not in ("supervisor", "group")}
        left = processes.stop(record, grace=2.0)
        if not left:
            self.fleet_file.unlink(missing_ok=True)
            (self.root / processes.RECORD_FILE).unlink(missing_ok=True)
        return left

    def _spec(self, name: str) -> node.NodeSpec:
        described = json.loads(self.fleet_file.read_text(encoding="utf-8"))
        config = FleetConfig(**described["config"])
        spec = next((s for s in self.specs(config) if s.name == name), None)
        if spec is None:
            raise SimError(f"no simulated node {name!r} in this fleet")
        return spec

    def reboot(self, name: str, timeout: float = RESET_WAIT_S) -> None:
        """Down (every session dropped), volatile settings lost, up again running its boot units.
        The node's BMC keeps running and answering throughout (PowerState PoweringOn while the node
        starts). A node whose sshd died, that hangs or that is off comes up."""
        with self._lock:
            spec = self._spec(name)
            self._stop_nodes([name])
            with state.locked(spec.directory) as current:
                boot.power_cycle(current, spec.directory / "sys")
                node_power.powered_down(current, node_power.POWERING_ON)
            self._power_on(spec, timeout)

    def _power_on(self, spec: node.NodeSpec, timeout: float) -> None:
        self._start_node(spec)
        self._wait_ready([spec], StartWait.of(timeout, "a reboot's wait"))
        with state.locked(spec.directory) as current:
            current["power_state"] = node_power.ON

    def power_off(self, name: str, why: str) -> None:
        """The node's host off, as its BMC turns it off: its processes stopped, volatile settings
        lost, PowerState Off, recorded as down for ``why``, until it is powered on or rebooted."""
        with self._lock:
            spec = self._spec(name)
            with state.locked(spec.directory) as current:
                current["power_state"] = node_power.POWERING_OFF
            self._stop_nodes([name])
            self.processes.pop(name, None)
            with state.locked(spec.directory) as current:
                boot.power_cycle(current, spec.directory / "sys")
                node_power.powered_down(current, node_power.OFF)
            self.record["nodes"].setdefault(name, {})["down"] = f"powered off ({why})"
            self._save_record()

    def reset(self, name: str, reset_type: str, timeout: float = RESET_WAIT_S) -> str:
        """Carries out one reset request (node_power.plan: a Redfish ResetType, or `gpufleet-sim
        reboot`'s); returns the answer: "ok", or "ignored: why" for a request the node does not act on."""
        with self._lock:
            spec = self._spec(name)
            current = state.load(spec.directory)
            proc = self.processes.get(name)
            running = proc is not None and proc.poll() is None
            what, why = node_power.plan(
                reset_type, node_power.power_state(current), running and node_power.answers(current)
            )
            if what == node_power.IGNORE:
                return f"ignored: {why}"
            if what == node_power.REBOOT:
                self.reboot(name, timeout)
            elif what == node_power.POWER_OFF:
                self.power_off(name, f"{reset_type} through its BMC")
            else:
                with state.locked(spec.directory) as current:
                    current["power_state"] = node_power.POWERING_ON
                self._power_on(spec, timeout)
            return "ok"

    def service_requests(self) -> list[str]:
        """Carries out every node's pending reset request (REBOOT_REQUEST), each answer left beside it
        (node_power.REBOOT_ANSWER: "ok", "ignored: ...", or "error: ..."); returns a line per request.
        A request is taken (renamed) before it is read, so one written meanwhile waits for the next look."""
        lines = []
        for request in sorted(self.root.glob(f"nodes/*/{REBOOT_REQUEST}")):
            name = request.parent.name
            taken = request.with_name(request.name + ".taken")
            try:
                os.replace(request, taken)
            except FileNotFoundError:
                continue
            asked = taken.read_text(encoding="utf-8").strip() or node_power.SIM_REBOOT
            try:
                answer = self.reset(name, asked)
            except SimError as exc:
                answer = f"error: {exc}"
            except Exception as exc:  # any failure is the answer; whoever services carries on
                answer = f"error: {type(exc).__name__}: {exc}"
            request.with_name(node_power.REBOOT_ANSWER).write_text(answer, encoding="utf-8")
            taken.unlink(missing_ok=True)
            lines.append(f"{name} {asked}: {answer}")
        return lines

    def _serve_requests(self) -> None:
        """A test-owned fleet's owner of its requests: a daemon thread that services them until stop."""
        self._stopping = threading.Event()

        def loop() -> None:
            while not self._stopping.wait(REQUEST_POLL_S):
                try:
                    for line in self.service_requests():
                        print(f"gpufleet-sim: {line}", file=sys.stderr, flush=True)
                except Exception as exc:  # logged: the next look tries again
                    print(f"gpufleet-sim: warning: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

        self._servicer = threading.Thread(target=loop, name=f"sim-requests {self.root.name}", daemon=True)
        self._servicer.start()

    def _why_down(self, name: str, returncode: int) -> str:
        """What died: the node's PID 1 (its sshd), as its `unshare` tells it. unshare exits as its
        child did (util-linux 2.38 exits 1 instead when the child was killed, and logs why)."""
        sshd = self.record["nodes"].get(name, {}).get("sshd", {}).get("pid", "?")
        if returncode < 0:
            return f"sshd (pid {sshd}) {processes.describe_exit(returncode)}"
        last = ""
        with contextlib.suppress(OSError):
            log = (self.root / "nodes" / name / "sshd.log").read_text(encoding="utf-8", errors="replace")
            last = ([line.strip() for line in log.splitlines() if line.strip()] or [""])[-1][:200]
        if returncode == 1 and last.startswith("unshare: sigprocmask unblock failed"):
            return f"sshd (pid {sshd}) was killed by a signal (this unshare does not say which)"
        why = f"sshd (pid {sshd}) is gone, unshare {processes.describe_exit(returncode)}"
        return f"{why} ({last})" if last else why

    def poll(self) -> list[str]:
        """Notices nodes and BMCs that died since the last look, records why; returns the news."""
        news = []
        for name, proc in self.processes.items():
            parts = self.record["nodes"].get(name, {})
            if proc.poll() is None or "down" in parts:
                continue
            parts["down"] = self._why_down(name, proc.returncode)
            news.append(f"{name} is down: {parts['down']}")
        for name, proc in self.bmcs.items():
            parts = self.record["nodes"].get(name, {})
            if proc.poll() is None or "bmc_down" in parts:
                continue
            parts["bmc_down"] = f"bmc (pid {proc.pid}) {processes.describe_exit(proc.returncode)}"
            news.append(f"{name}'s BMC is down: {parts['bmc_down']}")
        if news:
            self._save_record()
        return news

    # -- ssh ----------------------------------------------------------------
    def _client_key(self) -> None:
        self.ssh_dir.mkdir(parents=True, exist_ok=True)
        if not self.client_key.exists():
            subprocess.run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "gpufleet-sim",
                    "-f",
                    str(self.client_key),
                ],
                check=True,
            )

    def _write_known_hosts(self, specs: list[node.NodeSpec], leaves: list[LeafSpec]) -> None:
        lines = []
        for spec in specs:
            key_type, key_data = spec.host_key.with_suffix(".pub").read_text(encoding="utf-8").split()[:2]
            lines.append(f"[{spec.address}]:{spec.port} {key_type} {key_data}")
        lines += [
            sonic.known_host(self.leaf_dir, leaf.name, leaf.address, leaf.port)
            for leaf in leaves
            if leaf.os == sonic.OS
        ]
        self.known_hosts.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _handshake(self, spec: node.NodeSpec, pkey: paramiko.PKey) -> None:
        """A real SSH handshake: the node must present the host key we recorded, and take ours."""
        expected = paramiko.Ed25519Key.from_private_key_file(str(spec.host_key))
        with paramiko.Transport((spec.address, spec.port)) as transport:
            transport.banner_timeout = 5
            transport.connect()
            if transport.get_remote_server_key().asbytes() != expected.asbytes():
                raise SimError(f"{spec.name} presented an unexpected host key")
            transport.auth_publickey("root", pkey)

    def _wait_ready(self, specs: list[node.NodeSpec], wait: StartWait) -> None:
        """Every node answers SSH with its host key (the nodes tried in turn, none waited on alone)."""
        pkey = paramiko.Ed25519Key.from_private_key_file(str(self.client_key))

        def probe(spec: node.NodeSpec) -> str | None:
            proc = self.processes[spec.name]
            if proc.poll() is not None:
                log = (spec.directory / "sshd.log").read_text(encoding="utf-8", errors="replace")
                raise SimError(
                    f"{spec.name} exited with {proc.returncode} while starting: {log.strip()[-400:]}"
                )
            try:
                self._handshake(spec, pkey)
            except (OSError, paramiko.SSHException) as exc:
                return f"sshd {spec.address}:{spec.port}: {exc or type(exc).__name__}"
            self._record_inside(spec)
            return None

        wait_for("nodes", {s.name: partial(probe, s) for s in specs}, wait)

    # -- inventory ----------------------------------------------------------
    def _host_vars(self, spec: node.NodeSpec, bmc_password: str) -> dict[str, object]:
        return {
            "ansible_host": spec.address,
            "gpufleet_bmc_address": f"https://{spec.address}",
            "gpufleet_bmc_username": launch.USERNAME,
            "gpufleet_bmc_password": vault.Vaulted(vault.encrypt(bmc_password, self.vault_password_file)),
            "fabric_cabling": self._cabling(spec),
        }

    def bmc_credentials(self, name: str) -> tuple[str, str]:
        """(user, password) of a node's BMC, decrypted from the inventory (for tests and operators)."""
        inventory = yaml.load(self.inventory_path.read_text(encoding="utf-8"), Loader=vault.InventoryLoader)
        for group in inventory["all"]["children"]["gpu_nodes"]["children"].values():
            if name in group.get("hosts", {}):
                host = group["hosts"][name]
                return host["gpufleet_bmc_username"], vault.decrypt(
                    host["gpufleet_bmc_password"], self.vault_password_file
                )
        raise SimError(f"no simulated node {name!r} in {self.inventory_path}")

    def _cabling(self, spec: node.NodeSpec) -> dict[str, str]:
        """The cabling plan of a node as an operator writes it: RoCE port -> leaf:port."""
        nics = state.load(spec.directory)["nics"]
        return {
            n["ibdev"]: f"{n['neighbor']['chassis']}:{n['neighbor']['port']}"
            for n in nics
            if n.get("neighbor")
        }

    def switch_credentials(self, name: str) -> tuple[str, str]:
        """(user, password) of a leaf's NVUE API, decrypted from the inventory (for tests)."""
        inventory = yaml.load(self.inventory_path.read_text(encoding="utf-8"), Loader=vault.InventoryLoader)
        host = inventory["all"]["children"]["leaf_switches"]["hosts"].get(name)
        if host is None:
            raise SimError(f"no simulated leaf {name!r} in {self.inventory_path}")
        if host.get("gpufleet_switch_os") == sonic.OS:
            raise SimError(f"{name} runs SONiC: it has no NVUE account (it is read over SSH)")
        return host["gpufleet_switch_username"], vault.decrypt(
            host["gpufleet_switch_password"], self.vault_password_file
        )

    def _leaf_group(self, leaves: list[LeafSpec], passwords: dict[str, str]) -> dict[str, Any]:
        for leaf in leaves:
            # the password in a file only root reads, as the fleet's vault password is, for an
            # inventory written by hand (molecule's: lookup('ansible.builtin.file', ...))
            secret = self.leaf_dir / f"{leaf.name}.password"
            secret.touch(mode=0o600)
            secret.write_text(passwords[leaf.name], encoding="utf-8")
        return {
            "hosts": {
                leaf.name: self._sonic_host(leaf)
                if leaf.os == sonic.OS
                else {
                    "gpufleet_switch_address": f"https://{leaf.address}:{nvue.PORT}",
                    "gpufleet_switch_username": nvue.USERNAME,
                    "gpufleet_switch_password": vault.Vaulted(
                        vault.encrypt(passwords[leaf.name], self.vault_password_file)
                    ),
                }
                for leaf in leaves
            },
            "vars": {
                # read and changed from the controller, as the BMCs are
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "gpufleet_switch_ca_path": str(self.leaf_dir / "ca.pem"),
            },
        }

    def _sonic_host(self, leaf: LeafSpec) -> dict[str, Any]:
        """A SONiC leaf as an operator's inventory has it: its OS, and an SSH connection (over the
        group's local one, which is for the NVUE leaves); no NVUE address or account."""
        return {
            "gpufleet_switch_os": sonic.OS,
            "ansible_connection": "ssh",
            "ansible_host": leaf.address,
            "ansible_port": leaf.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.client_key),
            "ansible_ssh_common_args": (
                f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
            ),
        }

    def _write_inventory(
        self,
        specs: list[node.NodeSpec],
        bmc_passwords: dict[str, str],
        leaves: list[LeafSpec],
        leaf_passwords: dict[str, str],
    ) -> None:
        vault.ensure_password_file(self.vault_password_file)
        profile_group = "profile_" + specs[0].profile.replace("-", "_")
        inventory = {
            "all": {
                "children": {
                    "leaf_switches": self._leaf_group(leaves, leaf_passwords),
                    "gpu_nodes": {
                        "children": {
                            profile_group: {
                                "hosts": {s.name: self._host_vars(s, bmc_passwords[s.name]) for s in specs}
                            }
                        },
                        "vars": {
                            "ansible_port": specs[0].port,
                            "ansible_user": "root",
                            "ansible_python_interpreter": node.NODE_PYTHON,
                            "ansible_ssh_private_key_file": str(self.client_key),
                            "ansible_ssh_common_args": (
                                f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
                            ),
                            "gpufleet_bmc_ca_path": str(self.bmc_dir / "ca.pem"),
                        },
                    },
                },
            }
        }
        header = (
            "# Written by `gpufleet-sim up`; the simulated fleet. Do not edit.\n"
            f"# BMC passwords are vaulted: ansible needs --vault-password-file {self.vault_password_file}\n"
        )
        text = yaml.dump(inventory, Dumper=vault.InventoryDumper, sort_keys=False)
        self.inventory_path.write_text(header + text, encoding="utf-8")
        link = self.root / "group_vars"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(GROUP_VARS, target_is_directory=True)


def _spawn(
    argv: list[str], log_path: Path, dies_with_parent: Callable[[], None]
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """Starts ``argv``, its output appended to ``log_path``, set to die with this process: the
    process and what processes.json records of it."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=dies_with_parent
        )
    return proc, processes.Proc(proc.pid, _start_time(proc.pid)).as_dict()


def _start_time(pid: int) -> int:
    found = processes.identify(pid)
    # a child that already exited is recorded with a start time no process has
    return found.start if found is not None else -1
