"""The gate's controller CPU per node against `ansible -m ping` on the same nodes (issue 40's method), and
optionally against another checkout's gate (--baseline DIR), on one simulated fleet, in interleaved rounds.

The fleet is started and provisioned once by this checkout, then gated once, unmeasured, so every node
serves (its instances running, as after a real gate) before the rounds. Each round runs `ansible -m ping`
over every node and `gpufleet gate` over every node with each tree's code and playbooks (the baseline's
through PYTHONPATH=DIR/src), the order reversed every other round, so all see the same load. Controller
CPU is user + system time of the command and every process it waits for (gpufleet, ansible-playbook, its
workers, ssh clients, modules run locally: run.measure_call). Printed: each tree's median controller CPU
per node, its ratio to ping's (issue 40: at most 10 x, goal 5 x), this / baseline, and each gate's task
results per node and play (bench/callbacks/task_count.py: ok, changed, failed and skipped alike, as each
costs the controller a worker fork).

    .venv/bin/python bench/gate_cpu.py [--baseline /tmp/gate-base] [--nodes 4] [--rounds 2]

With --commands (e.g. provision,check,drift,watch,gate) each round runs each of those gpufleet commands
with each tree, counted and measured the same way (issue 40's table: tasks per node and controller CPU per
node of each command, before and after); the order of the trees and commands is reversed every other round.
A command's exit status is printed with it (drift, check and watch exit 1 for what they find).

The baseline is a checkout with its collection link (`git archive <commit> | tar -x -C DIR`, then
`make .gpufleet/collections/ansible_collections/gpufleet/node` in it); this checkout's venv runs both.
"""

from __future__ import annotations

import argparse
import configparser
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import run  # bench/run.py, beside this file: the fleet, its gpufleet runs and how a run is measured
from gpufleet_sim.fleet import Fleet, FleetConfig

import gpufleet.procs as procs

REPO = run.REPO
BIN = run.BIN
COUNTER_DIR = Path(__file__).resolve().parent / "callbacks"


def _callbacks(tree: Path) -> str:
    """The tree's own enabled callbacks (its ansible.cfg) and the bench's task counter."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(tree / "ansible.cfg")
    enabled = [name.strip() for name in config.get("defaults", "callbacks_enabled", fallback="").split(",")]
    return ",".join([name for name in enabled if name] + ["task_count"])


def gate(tree: Path, burn_in: int, counts: Path, ctx: run.Context, control_dir: Path) -> None:
    """One gate over every node with the code and playbooks of ``tree``; it must admit them all. Its task
    results per host and play are added to ``counts``."""
    command(tree, "gate", burn_in, counts, {}, ctx, control_dir)


# The exit statuses a command may end with on a serving fleet without faults: the gate must admit every node
# and provision must succeed; drift, check and watch report what they find (1), which the bench prints.
ACCEPTED = {"gate": (0,), "provision": (0,), "check": (0, 1), "drift": (0, 1), "watch": (0, 1)}


def command(
    tree: Path,
    name: str,
    burn_in: int,
    counts: Path,
    codes: dict[str, list[int]],
    ctx: run.Context,
    control_dir: Path,
) -> None:
    """One ``gpufleet <name>`` over every node with the code and playbooks of ``tree``; its task results per
    host and play are added to ``counts``, its exit status to ``codes[name]``."""
    report_dir = ctx.work / f"{name}-{tree.name}"
    shutil.rmtree(report_dir, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir)}
    # Each tree's own state directory (run locks, ansible-runner's private directories): gpufleet sweeps the
    # directories of runs it believes gone, and two trees that name a run's process differently (07becea:
    # clock ticks; now: psutil's create time) would sweep each other's, or another user's on this machine.
    env["GPUFLEET_STATE_DIR"] = str(ctx.work / f"state-{tree.name}")
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env.update(
        ANSIBLE_CALLBACK_PLUGINS=str(COUNTER_DIR),
        ANSIBLE_CALLBACKS_ENABLED=_callbacks(tree),
        GPUFLEET_BENCH_TASKS=str(counts),
    )
    argv = [str(BIN / "gpufleet"), name, "--inventory", str(ctx.inventory)]
    argv += ["--vault-password-file", str(ctx.fleet.vault_password_file), "--report-dir", str(report_dir)]
    if name == "gate":
        argv += ["--burn-in-seconds", str(burn_in)]
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False)
    codes.setdefault(name, []).append(proc.returncode)
    if proc.returncode not in ACCEPTED.get(name, (0,)):
        tail = f"{proc.stdout[-800:]}{proc.stderr[-800:]}"
        raise run.BenchError(f"{name} ({tree}): rc {proc.returncode}: {tail}")


def provision(ctx: run.Context) -> None:
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=ctx.work))
    try:
        proc = run._gpufleet(ctx, control_dir, "provision", ctx.work / "provision-report")
    finally:
        run._close_masters(control_dir)
        shutil.rmtree(control_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise run.BenchError(f"provision: rc {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-800:]}")


def per_node(counts: Path, gates: int, nodes: int) -> dict[str, float]:
    """Task results per node and play, averaged over the gates counted and the nodes."""
    known: dict[str, dict[str, dict[str, int]]] = json.loads(counts.read_text(encoding="utf-8"))
    plays: dict[str, float] = {}
    for host_plays in known.values():
        for play, outcomes in host_plays.items():
            plays[play] = plays.get(play, 0.0) + sum(outcomes.values()) / (gates * nodes)
    return plays


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout (with src/) to gate as well")
    parser.add_argument("--nodes", type=int, default=4, help="simulated nodes, all gated at once (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="gates of each tree (default 2)")
    parser.add_argument("--burn-in-seconds", type=int, default=5, help="each gate's burn-in (default 5)")
    parser.add_argument("--subnet", default="127.0.91", help="loopback /24 for the fleet")
    parser.add_argument("--json", type=Path, help="also write every sample here")
    parser.add_argument(
        "--commands",
        default="",
        help="also measure these gpufleet commands with each tree (comma-separated: provision, check, "
        "drift, watch, gate): tasks and controller CPU per node of each",
    )
    args = parser.parse_args(argv)
    commands = [c for c in args.commands.split(",") if c]
    unknown = [c for c in commands if c not in ACCEPTED]
    if unknown:
        print(
            f"bench: --commands: unknown {', '.join(unknown)}; known: {', '.join(ACCEPTED)}", file=sys.stderr
        )
        return 2
    trees = {"this": REPO}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
        if not (trees["baseline"] / "src" / "gpufleet").is_dir():
            print(f"bench: --baseline {trees['baseline']} has no src/gpufleet", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("bench: simulated nodes need namespaces: run as root", file=sys.stderr)
        return 2
    procs.become_subreaper()
    # "this", "baseline": each tree's gate (the figure); "this provision", ...: --commands
    runs = {name: (tree, "gate") for name, tree in trees.items()}
    if commands:
        runs = {f"{name} {c}": (tree, c) for c in commands for name, tree in trees.items()}
    methods = ["ping", *runs]
    samples: dict[str, list[run.Sample]] = {name: [] for name in methods}
    tasks: dict[str, dict[str, float]] = {}
    codes: dict[str, dict[str, list[int]]] = {name: {} for name in runs}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-gate-bench-") as tmp:
        work = Path(tmp)
        counts = {name: work / f"tasks-{name.replace(' ', '-')}.json" for name in runs}
        fleet = Fleet(work / "sim")
        print(f"== {args.nodes} nodes on {args.subnet}.0/24: up, provision, one gate ...", flush=True)
        fleet.up(FleetConfig(nodes=args.nodes, subnet=args.subnet), timeout=180.0)
        try:
            ctx = run.Context(fleet, args.nodes, work)
            provision(ctx)
            # serving nodes: one gate first, not measured, so every node serves before the rounds
            warm_up = work / "tasks-warm-up.json"
            run.measure_call(ctx, functools.partial(gate, REPO, args.burn_in_seconds, warm_up))
            for round_no in range(args.rounds):
                order = methods if round_no % 2 == 0 else list(reversed(methods))
                for name in order:
                    work_fn: Any = (
                        run.ping
                        if name == "ping"
                        else functools.partial(
                            command, *runs[name][:2], args.burn_in_seconds, counts[name], codes[name]
                        )
                    )
                    sample = run.measure_call(ctx, work_fn)
                    samples[name].append(sample)
                    loads.append(os.getloadavg()[0])
                    print(
                        f"   round {round_no + 1}: {name:<8} {sample.wall_s:6.1f} s wall, "
                        f"{sample.controller_cpu_s:6.2f} s controller CPU "
                        f"({sample.controller_cpu_s / args.nodes:.2f} per node), "
                        f"{sample.node_cpu_s:6.1f} s node CPU",
                        flush=True,
                    )
            tasks = {name: per_node(counts[name], args.rounds, args.nodes) for name in runs}
        except run.BenchError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
        finally:
            fleet.stop()
            procs.reap_children(timeout=5.0)
    per_node_cpu = {
        name: statistics.median(s.controller_cpu_s for s in rows) / args.nodes
        for name, rows in samples.items()
    }
    wall_s = {name: statistics.median(s.wall_s for s in rows) for name, rows in samples.items()}
    print()
    print(
        f"machine: {os.cpu_count()} CPUs, {os.uname().machine}, Python {sys.version.split()[0]}, "
        f"load average after each run {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"ping     : median {wall_s['ping']:.1f} s wall, {per_node_cpu['ping']:.2f} s controller CPU/node")
    for name, (tree, which) in runs.items():
        ratio = per_node_cpu[name] / per_node_cpu["ping"]
        verdict = f" (target <= 10: {'met' if ratio <= 10 else 'not met'}; goal 5)" if which == "gate" else ""
        print(
            f"{name:<9}: median {wall_s[name]:.1f} s wall, {per_node_cpu[name]:.2f} s controller CPU/node "
            f"= {ratio:.1f} x ping{verdict}; {sum(tasks[name].values()):.1f} task results per node ({tree}); "
            f"exit {', '.join(str(c) for c in codes[name].get(which, []))}"
        )
        for play, count in tasks[name].items():
            print(f"    {count:5.1f}  {play}")
    for which in dict.fromkeys(c for _, c in runs.values()):
        this, base = ("this", "baseline") if not commands else (f"this {which}", f"baseline {which}")
        if base in runs:
            ratio = per_node_cpu[this] / per_node_cpu[base]
            print(f"{which} controller CPU per node, this / baseline = {ratio:.2f}")
    if commands:
        print()
        print("| command | tree | task results per node | controller CPU s per node | x ping |")
        print("|---|---|---:|---:|---:|")
        for name, (tree, which) in runs.items():
            print(
                f"| {which} | {tree.name} | {sum(tasks[name].values()):.1f} | {per_node_cpu[name]:.2f} | "
                f"{per_node_cpu[name] / per_node_cpu['ping']:.1f} |"
            )
    if args.json:
        rows = {name: [sample.__dict__ for sample in taken] for name, taken in samples.items()}
        args.json.write_text(
            json.dumps({"samples": rows, "tasks": tasks, "exit": codes}, indent=1), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
