"""Where a run's controller CPU goes, by process: `ansible -m ping` and `gpufleet drift` (bench/run.py's
methods and its `measure`) on one simulated fleet, with the kernel's BSD process accounting switched on
around each measured call (acct(2) through ctypes, no package needed; the kernel needs
CONFIG_BSD_PROCESS_ACCT_V3).

Each `acct_v3` record is a process that exited while accounting was on, with its user + system time (in
10 ms ticks: each process's time is truncated, so the total is under `measure`'s by up to 10 ms a process).
Only processes descending from this one count (the simulated nodes' sshd and tools, and other work on the
machine, do not); each is put in a part by its command and its place in the tree: the ssh clients and
masters, ansible's main process, its workers (a fork of it, the same command), gpufleet itself, the
preflight's `ansible-inventory`, anything else by its command.

    .venv/bin/python bench/acct_split.py --nodes 32 --rounds 2      # as root, under the fleet lock

One unmeasured run of each method first (payload builds), then ``--rounds`` rounds of ping and drift.
bench/README.md ("Drift against `ansible -m ping` at 32 and 128 nodes, in one run") has a table of it.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import struct
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gpufleet_sim.control as control
import run  # bench/run.py, beside this file: the fleet, its methods and how a run is measured
from gpufleet_sim.fleet import Fleet, FleetConfig

import gpufleet.procs as procs

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float),
# utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t each), comm[16]
_V3 = struct.Struct("<BBHIIIIIIf8H16s")
_AHZ = 100
METHODS = ("ansible -m ping", "gpufleet drift")


@dataclass(frozen=True)
class Record:
    pid: int
    ppid: int
    cpu_s: float
    comm: str


def _comp(value: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def records(data: bytes) -> Iterator[Record]:
    for offset in range(0, len(data) - _V3.size + 1, _V3.size):
        field = _V3.unpack_from(data, offset)
        if (field[1] & 0x0F) != 3:  # not a v3 record
            continue
        yield Record(
            pid=field[6],
            ppid=field[7],
            cpu_s=(_comp(field[10]) + _comp(field[11])) / _AHZ,
            comm=field[18].split(b"\0")[0].decode(errors="replace"),
        )


def part(chain: list[Record]) -> str:
    """The part of a process, from its ancestry (``chain``: the measured command first, the process last)."""
    this = chain[-1]
    if this.comm == "ssh":
        return "ssh clients and masters"
    if this.comm.startswith("ansible-invento"):
        return "ansible-inventory"
    if this.comm.startswith("ansible"):
        forked = len(chain) > 1 and chain[-2].comm == this.comm
        return "ansible's workers" if forked else "ansible's main process"
    if len(chain) == 1:
        return f"{this.comm} itself"
    return this.comm


def split(recs: list[Record], root_ppid: int) -> dict[str, tuple[int, float]]:
    """{part: (processes, CPU s)} of the processes that descend from ``root_ppid`` (this process)."""
    by_pid = {r.pid: r for r in recs}
    parts: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for rec in recs:
        chain = [rec]
        while chain[-1].ppid != root_ppid:
            parent = by_pid.get(chain[-1].ppid)
            if parent is None or parent in chain:
                chain = []
                break
            chain.append(parent)
        if not chain:
            continue
        name = part(list(reversed(chain)))
        parts[name][0] += 1
        parts[name][1] += rec.cpu_s
    return {name: (int(n), cpu) for name, (n, cpu) in parts.items()}


def accounted(path: Path, ctx: run.Context, method: str) -> tuple[run.Sample, dict[str, tuple[int, float]]]:
    libc = ctypes.CDLL(None, use_errno=True)
    path.touch()
    if libc.acct(str(path).encode()) != 0:
        raise OSError(ctypes.get_errno(), f"acct({path}): {os.strerror(ctypes.get_errno())}")
    try:
        sample = run.measure(ctx, method)
    finally:
        libc.acct(None)
    return sample, split(list(records(path.read_bytes())), os.getpid())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--subnet", default="127.0.90", help="loopback /24 for the fleet")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("acct_split: simulated nodes and acct(2) need root", file=sys.stderr)
        return 2
    procs.become_subreaper()
    with tempfile.TemporaryDirectory(prefix="gpufleet-acct-") as tmp:
        work = Path(tmp)
        fleet = Fleet(work / "sim")
        fleet.up(FleetConfig(nodes=args.nodes, subnet=args.subnet), timeout=120.0)
        try:
            ctx = run.Context(fleet, args.nodes, work)
            for name, fault in run.FAULTS.items():
                control.fault(fleet, name, fault, clear=False)
            ctx.addresses = {f"node{i:02d}": f"{args.subnet}.{i + 1}" for i in range(1, args.nodes + 1)}
            for method in METHODS:
                run.measure(ctx, method)
            for round_no in range(1, args.rounds + 1):
                for method in METHODS:
                    sample, parts = accounted(work / f"pacct-{round_no}-{method[:4]}", ctx, method)
                    total = sum(cpu for _, cpu in parts.values())
                    print(
                        f"== round {round_no}, {method}: measure {sample.controller_cpu_s:.2f} CPU-s, "
                        f"accounted {total:.2f}, load {sample.load_1m:.1f}"
                    )
                    for name, (count, cpu) in sorted(parts.items(), key=lambda kv: -kv[1][1]):
                        print(f"   {cpu:7.2f} s  {count:4d}  {name}")
                    sys.stdout.flush()
        finally:
            fleet.stop()
            procs.reap_children(timeout=5.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
