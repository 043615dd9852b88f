"""The gate's controller CPU per node: this checkout against another one (--baseline DIR), on one
simulated fleet, in interleaved rounds.

The fleet is started and provisioned once by this checkout. Each round runs `gpufleet gate` over every
node with each tree's code and playbooks (the baseline's through PYTHONPATH=DIR/src), the order
alternating between rounds, so both see the same load. Controller CPU is the gpufleet process and
everything it starts (ansible-playbook, its workers, ssh clients, modules run locally); the median
ratio is what is compared (issue 25: the gate's controller CPU per node at most 1.1 x before it).

    .venv/bin/python bench/gate_cpu.py --baseline /tmp/gate-base [--nodes 6] [--rounds 3]

The baseline is a checkout with its collection link (`git archive <commit> | tar -x -C DIR`, then
`make .gpufleet/collections/ansible_collections/gpufleet/node` in it); this checkout's venv runs both.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import run  # bench/run.py, beside this file: the fleet, its gpufleet runs and how a run is measured
from gpufleet_sim.fleet import Fleet, FleetConfig

import gpufleet.procs as procs

REPO = run.REPO
BIN = run.BIN


def gate(tree: Path, burn_in: int, ctx: run.Context, control_dir: Path) -> None:
    """One gate over every node with the code and playbooks of ``tree``; it must admit them all."""
    report_dir = ctx.work / f"gate-{tree.name}"
    shutil.rmtree(report_dir, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir)}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    argv = [str(BIN / "gpufleet"), "gate", "--inventory", str(ctx.inventory)]
    argv += ["--vault-password-file", str(ctx.fleet.vault_password_file), "--report-dir", str(report_dir)]
    argv += ["--burn-in-seconds", str(burn_in)]
    proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise run.BenchError(f"gate ({tree}): rc {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-800:]}")


def provision(ctx: run.Context) -> None:
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=ctx.work))
    try:
        proc = run._gpufleet(ctx, control_dir, "provision", ctx.work / "provision-report")
    finally:
        run._close_masters(control_dir)
        shutil.rmtree(control_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise run.BenchError(f"provision: rc {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-800:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout (with src/)")
    parser.add_argument("--nodes", type=int, default=6, help="simulated nodes, all gated at once (default 6)")
    parser.add_argument("--rounds", type=int, default=3, help="gates of each tree (default 3)")
    parser.add_argument("--burn-in-seconds", type=int, default=5, help="each gate's burn-in (default 5)")
    parser.add_argument("--subnet", default="127.0.91", help="loopback /24 for the fleet")
    parser.add_argument("--json", type=Path, help="also write every sample here")
    args = parser.parse_args(argv)
    baseline = args.baseline.resolve()
    if not (baseline / "src" / "gpufleet").is_dir():
        print(f"bench: --baseline {baseline} has no src/gpufleet", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench: simulated nodes need namespaces: run as root", file=sys.stderr)
        return 2
    procs.become_subreaper()
    trees = {"this": REPO, "baseline": baseline}
    samples: dict[str, list[run.Sample]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="gpufleet-gate-bench-") as tmp:
        work = Path(tmp)
        fleet = Fleet(work / "sim")
        print(f"== {args.nodes} nodes on {args.subnet}.0/24: starting and provisioning ...", flush=True)
        fleet.up(FleetConfig(nodes=args.nodes, subnet=args.subnet), timeout=120.0)
        try:
            ctx = run.Context(fleet, args.nodes, work)
            provision(ctx)
            for round_no in range(args.rounds):
                order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
                for name in order:
                    sample = run.measure_call(ctx, functools.partial(gate, trees[name], args.burn_in_seconds))
                    samples[name].append(sample)
                    print(
                        f"   round {round_no + 1}: {name:<8} {sample.wall_s:6.1f} s wall, "
                        f"{sample.controller_cpu_s:6.1f} s controller CPU, "
                        f"{sample.node_cpu_s:6.1f} s node CPU",
                        flush=True,
                    )
        except run.BenchError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
        finally:
            fleet.stop()
            procs.reap_children(timeout=5.0)
    cpu_s = {name: statistics.median(s.controller_cpu_s for s in rows) for name, rows in samples.items()}
    wall_s = {name: statistics.median(s.wall_s for s in rows) for name, rows in samples.items()}
    print()
    print(f"machine: {os.cpu_count()} CPUs, {os.uname().machine}, Python {sys.version.split()[0]}")
    for name in trees:
        print(
            f"{name:<8} ({trees[name]}): median {wall_s[name]:.1f} s wall, {cpu_s[name]:.1f} s controller "
            f"CPU, {cpu_s[name] / args.nodes:.2f} s per node"
        )
    ratio = cpu_s["this"] / cpu_s["baseline"]
    verdict = "met" if ratio <= 1.1 else "not met"
    print(f"gate controller CPU per node, this / baseline = {ratio:.2f} (target <= 1.1: {verdict})")
    if args.json:
        rows = {name: [sample.__dict__ for sample in taken] for name, taken in samples.items()}
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
