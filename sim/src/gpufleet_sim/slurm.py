"""A real Slurm cluster for a simulated fleet (`gpufleet-sim up --slurm`): Debian's munged, slurmctld
and one slurmd per simulated node, each node registered under its own name at its own address.

Real daemons, not a stand-in: the drain role's `scontrol update` and node_facts' `scontrol show
node`, run on a node over SSH, reach the real controller. The node's own /etc/slurm/slurm.conf
(its /etc overlay) points at it, and the fake `scontrol` is not installed there.

What is not modelled:
- every daemon runs on the harness host, slurmd with `-N <node>` on a port of its own (the nodes
  share the loopback network), so a simulated reboot leaves slurmd running. Inside a node's own
  namespaces slurmd does not start: the node's /sys is the simulated sysfs, without /sys/fs/cgroup,
  and Slurm 22.05's slurmd refuses to run without a cgroup filesystem ("Unable to initialize cgroup
  plugin"; CgroupPlugin=disabled came later). Binding the host's cgroup tree there would let it
  make cgroups on the host;
- no cgroups, no jobs and no accounting: gpufleet only drains, resumes and reads nodes.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpufleet_sim.ports import free_port

MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
SCONTROL = "/usr/bin/scontrol"
# Where a Debian node's scontrol looks for its configuration.
NODE_CONF = Path("etc/slurm/slurm.conf")


class SlurmError(RuntimeError):
    """The cluster could not be laid out, started or read."""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    address: str
    port: int


def installed() -> list[str]:
    """The Slurm and munge programs missing on this host (empty when all are there)."""
    return [p for p in (MUNGED, SLURMCTLD, SLURMD, SCONTROL) if not os.access(p, os.X_OK)]


class SlurmCluster:
    """The cluster's files under ``root`` (munge key and socket, slurm.conf, state, logs)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def controller_log(self) -> Path:
        return self.root / "log" / "slurmctld.log"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def prepare(self, nodes: list[tuple[str, str]]) -> None:
        """Lays out a fresh cluster for these (name, address) nodes, each slurmd on a port of its own."""
        missing = installed()
        if missing:
            needed = "--slurm needs Debian's slurmctld, slurmd and munge"
            raise SlurmError(f"{needed}: missing {', '.join(missing)}")
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory others cannot enter, and a key others can read
        (self.root / "munge").chmod(0o711)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        members = [SlurmNode(name, address, free_port()) for name, address in nodes]
        self.conf.write_text(self._conf_text(members, free_port()), encoding="utf-8")

    def _conf_text(self, members: list[SlurmNode], controller_port: int) -> str:
        host = socket.gethostname().split(".")[0]
        lines = [
            "# Written by `gpufleet-sim up --slurm` for this simulated fleet.",
            "ClusterName=gpufleet-sim",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={controller_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}/%n",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.controller_log}",
            f"SlurmdLogFile={self.root / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/linear",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SwitchType=switch/none",
            # the simulated nodes are not the host's CPUs: take the configured ones
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "SlurmdTimeout=60",
        ]
        lines += [
            f"NodeName={m.name} NodeAddr={m.address} Port={m.port} CPUs=1 State=UNKNOWN" for m in members
        ]
        lines += ["PartitionName=gpu Nodes=ALL Default=YES State=UP", ""]
        return "\n".join(lines)

    def munged_argv(self) -> list[str]:
        munge = self.root / "munge"
        return [
            MUNGED,
            "--foreground",
            "--force",
            f"--socket={self.munge_socket}",
            f"--key-file={munge / 'munge.key'}",
            f"--log-file={munge / 'munged.log'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]

    def controller_argv(self) -> list[str]:
        # -i: a fresh cluster, no saved state to recover
        return [SLURMCTLD, "-D", "-i", "-f", str(self.conf)]

    def slurmd_argv(self, name: str) -> list[str]:
        return [SLURMD, "-D", "-N", name, "-f", str(self.conf)]

    def wait_munge(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.munge_socket.exists():
            if time.monotonic() > deadline:
                log = self._tail("munge/munged.log")
                raise SlurmError(f"munged did not create {self.munge_socket}: {log}")
            time.sleep(0.05)

    def wait_idle(self, names: list[str], timeout: float) -> None:
        """Until every node has registered and is IDLE (slurmctld up, each slurmd answering)."""
        deadline = time.monotonic() + timeout
        pending = list(names)
        while pending:
            with contextlib.suppress(SlurmError):  # slurmctld not answering yet
                pending = [n for n in pending if self.node(n)["State"] != "IDLE"]
            if pending and time.monotonic() > deadline:
                raise SlurmError(
                    f"Slurm nodes not IDLE after {timeout:.0f} s: {', '.join(pending)}; "
                    f"slurmctld: {self._tail('log/slurmctld.log')}"
                )
            time.sleep(0.2)

    def node(self, name: str) -> dict[str, str]:
        """The node as the real controller shows it (`scontrol show node -o`): State, Reason, ...
        (Reason without Slurm's ``[user@time]`` suffix, absent when the node has none)."""
        argv = [SCONTROL, "show", "node", "-o", name]
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env(), check=False)
        if done.returncode != 0:
            raise SlurmError(f"scontrol show node {name}: rc {done.returncode}: {done.stderr.strip()}")
        return parse_node_line(done.stdout)

    def updates(self, name: str) -> list[tuple[float, str]]:
        """What the controller did to the node, in order, from its log: (epoch seconds, what), e.g.
        (…, "state set to DRAINED"), (…, "reason set to: gpufleet gate (post-maintenance)")."""
        found = []
        pattern = re.compile(r"^\[([0-9T:.-]+)\] update_node: node " + re.escape(name) + r" (.+)$")
        log = self.controller_log
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        for line in text.splitlines():
            match = pattern.match(line)
            if match:
                # slurmctld logs local time to the millisecond
                when = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
                found.append((when, match.group(2)))
        return found

    def changes(self, name: str) -> list[dict[str, object]]:
        """The node's drains and resumes, in order, as the controller logged them: ``{"state":
        "drain", "reason": ..., "time": ...}`` or ``{"state": "resume", "time": ...}``."""
        found: list[dict[str, object]] = []
        reason = None
        for when, what in self.updates(name):
            if what.startswith("reason set to: "):
                reason = what[len("reason set to: ") :]
            elif what in ("state set to DRAINED", "state set to DRAINING"):
                found.append({"state": "drain", "reason": reason, "time": when})
            elif what == "state set to IDLE":
                found.append({"state": "resume", "time": when})
        return found

    def wait_state(self, name: str, wanted: str, timeout: float = 10.0) -> dict[str, str]:
        """The node once its State is ``wanted`` (a resumed node reads IDLE+NOT_RESPONDING until the
        controller's next ping); SlurmError naming what it is when the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.node(name)
            if found["State"] == wanted:
                return found
            if time.monotonic() > deadline:
                is_now = found["State"]
                raise SlurmError(f"Slurm node {name} is {is_now}, not {wanted}, after {timeout:.0f} s")
            time.sleep(0.2)

    def _tail(self, relative: str) -> str:
        try:
            return " | ".join((self.root / relative).read_text(errors="replace").strip().splitlines()[-5:])
        except OSError as exc:
            return f"({exc})"


def parse_node_line(text: str) -> dict[str, str]:
    """`scontrol show node -o` (one line of Key=Value words; Reason's value holds spaces and ends with
    `[user@time]`) as a dict."""
    line = text.strip()
    reason = None
    at = line.find(" Reason=")
    if at >= 0:
        reason_text = line[at + len(" Reason=") :]
        # Reason is free text up to its [user@time]; what follows are Key=Value words again
        match = re.match(r"(.*?) \[[^\]]*\](.*)$", reason_text)
        reason, rest = (match.group(1), match.group(2)) if match else (reason_text, "")
        line = line[:at] + rest
    fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
    if "State" not in fields:
        raise SlurmError(f"no State= in scontrol's answer: {text.strip()[:200]}")
    if reason is not None:
        fields["Reason"] = reason
    return fields
