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
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import run  # bench/run.py, beside this file: its ssh masters' teardown and BenchError

import gpufleet.procs as procs
from gpufleet.sim.fleet import Fleet, FleetConfig

REPO = run.REPO
BIN = run.BIN


def gate(tree: Path, fleet: Fleet, work: Path, burn_in: int) -> tuple[float, float]:
    """One gate over every node with the code of ``tree``: (wall s, controller CPU s); it must admit all."""
    report_dir = work / f"gate-{tree.name}"
    shutil.rmtree(report_dir, ignore_errors=True)
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=work))
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir)}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    argv = [str(BIN / "gpufleet"), "gate", "--inventory", str(fleet.inventory_path)]
    argv += ["--vault-password-file", str(fleet.vault_password_file), "--report-dir", str(report_dir)]
    argv += ["--burn-in-seconds", str(burn_in)]
    procs.reap_children()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False
        )
    finally:
        wall = time.perf_counter() - start
        run._close_masters(control_dir)
        procs.reap_children(timeout=1.0)
        shutil.rmtree(control_dir, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise run.BenchError(f"gate ({tree}): rc {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def provision(fleet: Fleet) -> None:
    argv = [str(BIN / "gpufleet"), "provision", "--inventory", str(fleet.inventory_path)]
    argv += ["--vault-password-file", str(fleet.vault_password_file)]
    argv += ["--report-dir", str(fleet.root / "provision-report")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
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
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="gpufleet-gate-bench-") as tmp:
        work = Path(tmp)
        fleet = Fleet(work / "sim")
        print(f"== {args.nodes} nodes on {args.subnet}.0/24: starting and provisioning ...", flush=True)
        fleet.up(FleetConfig(nodes=args.nodes, subnet=args.subnet), timeout=120.0)
        try:
            provision(fleet)
            for round_no in range(args.rounds):
                order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
                for name in order:
                    wall, cpu = gate(trees[name], fleet, work, args.burn_in_seconds)
                    samples[name].append((wall, cpu))
                    print(
                        f"   round {round_no + 1}: {name:<8} {wall:6.1f} s wall, {cpu:6.1f} s controller CPU"
                    )
        except run.BenchError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
        finally:
            fleet.stop()
            procs.reap_children(timeout=5.0)
    cpu_s = {name: statistics.median(c for _, c in rows) for name, rows in samples.items()}
    wall_s = {name: statistics.median(w for w, _ in rows) for name, rows in samples.items()}
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
        args.json.write_text(json.dumps(samples, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
