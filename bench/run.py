"""Fleet-scale timing: `gpufleet drift` against `ansible -m ping`, a naive playbook and clush.

Brings up simulated fleets (32 and 128 nodes by default), puts a different fault on two nodes,
then times each method side by side, in rotating order, several rounds. Every run starts with
cold SSH connections (its own ControlPath directory, masters closed after it), and every run's
result is checked before it counts: each method must find the same two faults and nothing on
a clean node. Prints the medians and the ratios; `--json FILE` keeps every sample.

Wall time is what an operator waits. Controller CPU (ansible, its forks and ssh clients) is
what grows with the fleet on a real controller; node CPU is what the commands cost on the nodes,
which a real fleet spends in parallel on each node's own cores but which the simulated nodes
here spend on the controller's.

Before the first round each method runs once unmeasured (--warmup): what a first run on a controller
pays once (the AnsiballZ payloads gpufleet's payload_cache keeps, which change whenever a module or
module_util does, the files Python and Ansible read) is left out of every method alike. Each run's
line gives the 1-minute load average when it started: the simulated nodes share the controller's cores.

With --baseline DIR (another checkout, e.g. `git archive <commit> | tar -x -C DIR`), its `gpufleet
drift` (PYTHONPATH=DIR/src: its code, playbooks and plugins) is timed too, in the same rounds on the
same fleet, as "baseline drift": before and after under the same load.

Fleets above SCALE_FROM nodes time ping and drift only: what grows with the fleet is drift's
controller CPU per node, and the naive playbook alone would take ~12 min a round at 128 nodes.

    .venv/bin/python bench/run.py [--sizes 32,128] [--rounds 3] [--warmup 1] [--methods ping,drift]
        [--subnet 127.0.90] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "sim" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import checks  # noqa: E402  (bench/checks.py, beside this file)
import gpufleet_sim.control as control  # noqa: E402
import yaml  # noqa: E402
from gpufleet_sim.bmc import vault  # noqa: E402
from gpufleet_sim.fleet import Fleet, FleetConfig  # noqa: E402

import gpufleet.procs as procs  # noqa: E402

BIN = Path(sys.executable).parent
# Two faults on two nodes; node01 stays clean. Each method must see exactly these.
FAULTS = {"node02": "pfc-off", "node03": "power-capped"}
EXPECTED = {"node02": "pfc", "node03": "power"}
METHODS = (
    "ansible -m ping",
    "gpufleet drift",
    "drift without fabric",
    "gpufleet watch",
    "gpufleet watch --act",
    "naive playbook",
    "clush probe",
)
SHORT_NAMES = dict(zip(("ping", "drift", "nofabric", "watch", "act", "naive", "clush"), METHODS, strict=True))
# --baseline DIR: that checkout's drift, timed beside this one's at every size
BASELINE = "baseline drift"
# Above this many nodes only ping and drift are timed (see the docstring).
SCALE_FROM = 32
# Issue 15's target for drift's controller CPU per node, at every size.
CPU_PER_NODE_TARGET = 0.35
# Issue 40's: drift's controller CPU at most this many times ansible -m ping's, at every size.
CPU_VS_PING_TARGET = 1.3


def chosen_methods(spec: str) -> tuple[str, ...]:
    """The METHODS named in ``spec`` ('ping,drift,naive'), in METHODS order; ping and drift always
    (every ratio is against them)."""
    names = {n.strip() for n in spec.split(",") if n.strip()}
    unknown = sorted(names - set(SHORT_NAMES))
    if unknown:
        raise ValueError(f"--methods: {', '.join(unknown)} is not one of {', '.join(SHORT_NAMES)}")
    names |= {"ping", "drift"}
    return tuple(m for short, m in SHORT_NAMES.items() if short in names)


class BenchError(RuntimeError):
    """A method's run did not do the work it is timed for; its time would mean nothing."""


@dataclass
class Sample:
    wall_s: float
    controller_cpu_s: float
    node_cpu_s: float
    # the 1-minute load average when the run started
    load_1m: float = 0.0


@dataclass
class Context:
    fleet: Fleet
    nodes: int
    work: Path
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def inventory(self) -> Path:
        return self.fleet.inventory_path


# -- the methods ---------------------------------------------------------------------------------
def _ansible_env(control_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{BIN}:{env.get('PATH', '')}",
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(REPO / ".gpufleet" / "collections"),
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(control_dir),
        ANSIBLE_NOCOLOR="1",
    )
    return env


def _run(argv: list[str], env: dict[str, str], timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def ping(ctx: Context, control_dir: Path) -> None:
    proc = _run(
        [
            str(BIN / "ansible"),
            "gpu_nodes",
            "-i",
            str(ctx.inventory),
            "-m",
            "ansible.builtin.ping",
            "-f",
            str(ctx.nodes),
            "--vault-password-file",
            str(ctx.fleet.vault_password_file),
        ],
        _ansible_env(control_dir),
    )
    pongs = len(re.findall(r"^node\d+ \| SUCCESS", proc.stdout, re.MULTILINE))
    if proc.returncode != 0 or pongs != ctx.nodes:
        tail = proc.stdout[-600:] + proc.stderr[-600:]
        raise BenchError(f"ping: rc {proc.returncode}, {pongs}/{ctx.nodes} pongs: {tail}")


def _without_fabric(ctx: Context) -> Path:
    """The fleet's inventory without its leaves and cabling plan: drift as it was before the fabric
    checks (no switch read, the fabric role given nothing to judge)."""
    inventory = yaml.load(ctx.inventory.read_text(encoding="utf-8"), Loader=vault.InventoryLoader)
    inventory["all"]["children"].pop("leaf_switches", None)
    for group in inventory["all"]["children"]["gpu_nodes"]["children"].values():
        for host in group["hosts"].values():
            host.pop("fabric_cabling", None)
    path = ctx.work / "no-fabric.yml"
    path.write_text(yaml.dump(inventory, Dumper=vault.InventoryDumper), encoding="utf-8")
    return path


def drift(ctx: Context, control_dir: Path) -> None:
    _drift(ctx, control_dir, ctx.inventory)


def drift_without_fabric(ctx: Context, control_dir: Path) -> None:
    _drift(ctx, control_dir, _without_fabric(ctx))


def baseline_drift(tree: Path) -> Callable[[Context, Path], None]:
    """`gpufleet drift` with the code, playbooks and plugins of the checkout ``tree``."""

    def work(ctx: Context, control_dir: Path) -> None:
        _drift(ctx, control_dir, ctx.inventory, tree)

    return work


def _drift(ctx: Context, control_dir: Path, inventory: Path, tree: Path = REPO) -> None:
    report_dir = ctx.work / "drift-report"
    shutil.rmtree(report_dir, ignore_errors=True)
    env = _ansible_env(control_dir)
    if tree != REPO:
        env.update(PYTHONPATH=str(tree / "src"), ANSIBLE_CONFIG=str(tree / "ansible.cfg"))
        env.update(ANSIBLE_COLLECTIONS_PATH=str(tree / ".gpufleet" / "collections"))
    proc = _run(
        [
            str(BIN / "gpufleet"),
            "drift",
            "--inventory",
            str(inventory),
            "--report-dir",
            str(report_dir),
            "--vault-password-file",
            str(ctx.fleet.vault_password_file),
        ],
        env,
    )
    if proc.returncode != 1 or not (report_dir / "report.json").exists():
        tail = proc.stdout[-600:] + proc.stderr[-600:]
        raise BenchError(f"gpufleet drift ({tree}): rc {proc.returncode} (1 expected): {tail}")
    hosts = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))["hosts"]
    found = {name: " ".join(c["setting"] for c in host.get("changes") or []) for name, host in hosts.items()}
    _expect("gpufleet drift", ctx, found, {"pfc": "rdma_qos.pfc", "power": "gpu_power.enforced_limit_w"})


def watch(ctx: Context, control_dir: Path) -> None:
    """`gpufleet watch` on the same fleet, its instances serving nothing (the gate started them before
    the faults): one look per node, the same two faults expected, node01 clean."""
    report_dir = ctx.work / "watch-report"
    shutil.rmtree(report_dir, ignore_errors=True)
    proc = _gpufleet(ctx, control_dir, "watch", report_dir)
    if proc.returncode != 1 or not (report_dir / "report.json").exists():
        tail = proc.stdout[-600:] + proc.stderr[-600:]
        raise BenchError(f"gpufleet watch: rc {proc.returncode} (1 expected): {tail}")
    hosts = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))["hosts"]
    found = {
        name: " ".join(c["name"] for c in host.get("checks") or [] if not c["ok"])
        for name, host in hosts.items()
    }
    _expect("gpufleet watch", ctx, found, {"pfc": "fabric.host_pfc[", "power": "gpu_power.enforced_limit_w["})


def watch_act(ctx: Context, control_dir: Path) -> None:
    """`gpufleet watch --act` (issue 39) on the same fleet with nothing to act on: a power cap and a host
    without PFC make no node unsafe to serve, so it is the watch plus the guardian's settings, plan and
    breaker; it must find what the watch finds and take no node out (issue 39: at most 1.1 x the watch)."""
    report_dir = ctx.work / "watch-act-report"
    shutil.rmtree(report_dir, ignore_errors=True)
    proc = _gpufleet(ctx, control_dir, "watch", report_dir, "--act")
    if proc.returncode != 1 or not (report_dir / "report.json").exists():
        tail = proc.stdout[-600:] + proc.stderr[-600:]
        raise BenchError(f"gpufleet watch --act: rc {proc.returncode} (1 expected): {tail}")
    hosts = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))["hosts"]
    acted = sorted(name for name, host in hosts.items() if host.get("guardian"))
    if acted:
        raise BenchError(f"gpufleet watch --act: acted on {', '.join(acted)} with nothing unsafe")
    found = {
        name: " ".join(c["name"] for c in host.get("checks") or [] if not c["ok"])
        for name, host in hosts.items()
    }
    marks = {"pfc": "fabric.host_pfc[", "power": "gpu_power.enforced_limit_w["}
    _expect("gpufleet watch --act", ctx, found, marks)


def _gpufleet(
    ctx: Context, control_dir: Path, command: str, report_dir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    argv = [
        str(BIN / "gpufleet"),
        command,
        *extra,
        "--inventory",
        str(ctx.inventory),
        "--report-dir",
        str(report_dir),
    ]
    argv += ["--vault-password-file", str(ctx.fleet.vault_password_file)]
    return _run(argv, _ansible_env(control_dir))


# Nodes gated at once: a gate's burn-in loads every GPU it gates, and 32 simulated nodes' burn-ins at
# once on two cores starve each other's vLLM requests (the gate then rightly blocks some).
SERVE_BATCH = 8


def serve(ctx: Context) -> None:
    """The gate, before any fault, in batches: it starts every node's instances, as in production."""
    names = [f"node{i:02d}" for i in range(1, ctx.nodes + 1)]
    for start in range(0, len(names), SERVE_BATCH):
        batch = names[start : start + SERVE_BATCH]
        report_dir = ctx.work / f"gate-report-{start}"
        control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=ctx.work))
        argv = [str(BIN / "gpufleet"), "gate", "--burn-in-seconds", "5", "--limit", ",".join(batch)]
        argv += ["--inventory", str(ctx.inventory), "--report-dir", str(report_dir)]
        argv += ["--vault-password-file", str(ctx.fleet.vault_password_file)]
        try:
            proc = _run(argv, _ansible_env(control_dir), timeout=1800.0)
        finally:
            _close_masters(control_dir)
            shutil.rmtree(control_dir, ignore_errors=True)
        if proc.returncode != 0:
            hosts = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))["hosts"]
            why = {n: h.get("message", "")[:300] for n, h in hosts.items() if h["status"] != "ok"}
            raise BenchError(f"gpufleet gate (to start the instances): rc {proc.returncode}: {why}")


def naive(ctx: Context, control_dir: Path) -> None:
    playbook = ctx.work / "naive_drift.yml"
    playbook.write_text(checks.naive_playbook(), encoding="utf-8")
    proc = _run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(ctx.inventory),
            str(playbook),
            "-f",
            str(ctx.nodes),
            "--vault-password-file",
            str(ctx.fleet.vault_password_file),
        ],
        _ansible_env(control_dir),
    )
    recap = {
        m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        for m in re.finditer(r"^(node\d+)\s+:\s+(.*)$", proc.stdout, re.MULTILINE)
    }
    if (
        proc.returncode != 0
        or len(recap) != ctx.nodes
        or any(
            r.get("failed") or r.get("unreachable") or r.get("ok") != len(checks.CHECKS)
            for r in recap.values()
        )
    ):
        raise BenchError(f"naive playbook: rc {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-400:]}")
    # A drifted setting is a changed task: the faulted nodes have one more than the clean node01.
    clean = recap["node01"]["changed"]
    for name, what in EXPECTED.items():
        if recap[name]["changed"] != clean + 1:
            raise BenchError(
                f"naive playbook: {name} ({what}) changed={recap[name]['changed']}, node01 {clean}"
            )


def clush(ctx: Context, control_dir: Path) -> None:
    by_address = {address: name for name, address in ctx.addresses.items()}
    ssh_options = (
        f"-p 2222 -l root -i {ctx.fleet.client_key} -o UserKnownHostsFile={ctx.fleet.known_hosts} "
        "-o StrictHostKeyChecking=yes -o BatchMode=yes"
    )
    proc = _run(
        [
            str(BIN / "clush"),
            "-w",
            ",".join(by_address),
            "-f",
            str(ctx.nodes),
            "-o",
            ssh_options,
            checks.script(),
        ],
        dict(os.environ),
    )
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        address, _, text = line.partition(": ")
        found[by_address.get(address, address)] = found.get(by_address.get(address, address), "") + " " + text
    if proc.returncode != 0 or set(found) - set(ctx.addresses):
        raise BenchError(f"clush: rc {proc.returncode}: {proc.stdout[-600:]}{proc.stderr[-600:]}")
    _expect("clush", ctx, found, {"pfc": "DRIFT pfc[", "power": "DRIFT power_limit["})


def _expect(method: str, ctx: Context, found: dict[str, str], marks: dict[str, str]) -> None:
    for name, what in EXPECTED.items():
        if marks[what] not in found.get(name, ""):
            raise BenchError(f"{method}: {name} ({FAULTS[name]}) not found: {found.get(name, '')[:300]}")
    clean = found.get("node01", "")
    if any(mark in clean for mark in marks.values()):
        raise BenchError(f"{method}: the clean node01 reported {clean[:300]}")


RUNNERS: dict[str, Callable[[Context, Path], None]] = dict(
    zip(METHODS, (ping, drift, drift_without_fabric, watch, watch_act, naive, clush), strict=True)
)


# -- measuring -------------------------------------------------------------------------------------
def _tree_cpu_s(roots: list[int]) -> float:
    """CPU seconds of these processes and every descendant, live or reaped (utime+stime+cutime+cstime)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(v) for v in fields[11:15])
    wanted = set(roots)
    total = 0
    for pid in ticks:
        walk = pid
        while walk > 1 and walk not in wanted:
            walk = parent.get(walk, 0)
        if walk in wanted:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


def _close_masters(control_dir: Path) -> None:
    for socket in control_dir.iterdir():
        subprocess.run(
            ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "bench"],
            capture_output=True,
            timeout=10,
            check=False,
        )


def measure(ctx: Context, method: str) -> Sample:
    return measure_call(ctx, RUNNERS[method])


def measure_call(ctx: Context, work: Callable[[Context, Path], None]) -> Sample:
    """Wall time, controller CPU (this process's children) and node CPU of ``work(ctx, control_dir)``,
    started with cold SSH connections (its own ControlPath directory, masters closed after it)."""
    node_roots = [p.pid for p in ctx.fleet.processes.values()]
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=ctx.work))
    procs.reap_children()
    load = os.getloadavg()[0]
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_nodes = _tree_cpu_s(node_roots)
    start = time.perf_counter()
    try:
        work(ctx, control_dir)
    finally:
        wall = time.perf_counter() - start
        _close_masters(control_dir)
        time.sleep(0.5)  # sessions end on the nodes; their sshd reaps them
        procs.reap_children(timeout=1.0)
        shutil.rmtree(control_dir, ignore_errors=True)
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    controller = (after_children.ru_utime - before_children.ru_utime) + (
        after_children.ru_stime - before_children.ru_stime
    )
    return Sample(wall, controller, _tree_cpu_s(node_roots) - before_nodes, load)


def bench_size(
    nodes: int, rounds: int, subnet: str, work: Path, methods: tuple[str, ...] = METHODS, warmup: int = 1
) -> dict[str, list[Sample]]:
    fleet = Fleet(work / f"sim-{nodes}")
    print(f"== {nodes} nodes: starting the simulated fleet on {subnet}.0/24 ...", flush=True)
    fleet.up(FleetConfig(nodes=nodes, subnet=subnet), timeout=120.0)
    try:
        ctx = Context(fleet, nodes, work)
        if "gpufleet watch" in methods or "gpufleet watch --act" in methods:
            print(f"   the gate starts the instances of {nodes} nodes ...", flush=True)
            serve(ctx)
        for name, fault in FAULTS.items():
            control.fault(fleet, name, fault, clear=False)
        ctx.addresses = {f"node{i:02d}": f"{subnet}.{i + 1}" for i in range(1, nodes + 1)}
        samples: dict[str, list[Sample]] = {m: [] for m in methods}
        for _ in range(warmup):
            for method in methods:
                sample = measure(ctx, method)
                print(f"   warm-up: {method:<16} {sample.wall_s:6.1f} s wall (not counted)", flush=True)
        for round_no in range(rounds):
            order = methods[round_no % len(methods) :] + methods[: round_no % len(methods)]
            for method in order:
                sample = measure(ctx, method)
                samples[method].append(sample)
                print(
                    f"   round {round_no + 1}: {method:<16} {sample.wall_s:6.1f} s wall, "
                    f"{sample.controller_cpu_s:6.1f} s controller CPU, {sample.node_cpu_s:6.1f} s node CPU, "
                    f"load {sample.load_1m:.1f}",
                    flush=True,
                )
        return samples
    finally:
        fleet.stop()


def sized_methods(nodes: int, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The methods timed on a fleet of ``nodes``: all of ``methods`` up to SCALE_FROM, then ping and drift."""
    return methods if nodes <= SCALE_FROM else tuple(m for m in methods if m in (*METHODS[:2], BASELINE))


def _medians(samples: dict[str, list[Sample]]) -> dict[str, Sample]:
    return {
        m: Sample(
            statistics.median(s.wall_s for s in v),
            statistics.median(s.controller_cpu_s for s in v),
            statistics.median(s.node_cpu_s for s in v),
            statistics.median(s.load_1m for s in v),
        )
        for m, v in samples.items()
    }


def growth(results: dict[int, dict[str, list[Sample]]]) -> str:
    """Drift's controller CPU per node at each size against the target, and what each added node cost
    between two sizes (a super-linear term shows as a marginal cost above the average)."""
    drift = {n: _medians(samples)["gpufleet drift"].controller_cpu_s for n, samples in results.items()}
    sizes = sorted(drift)
    per_node = ", ".join(f"{drift[n] / n:.3f} at {n} nodes" for n in sizes)
    met = all(drift[n] / n <= CPU_PER_NODE_TARGET for n in sizes)
    parts = [
        f"drift controller CPU per node: {per_node} "
        f"(target <= {CPU_PER_NODE_TARGET}: {'met' if met else 'not met'})"
    ]
    for small, large in itertools.pairwise(sizes):
        marginal = (drift[large] - drift[small]) / (large - small)
        parts.append(f"each node from {small} to {large} added {marginal:.3f} CPU-s")
    return "; ".join(parts)


def table(results: dict[int, dict[str, list[Sample]]]) -> str:
    rows = [
        "| nodes | method | wall s (median) | controller CPU s | controller CPU s/node | node CPU s "
        "| wall vs ping | load at start |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for nodes, samples in results.items():
        med = _medians(samples)
        ping_wall = med["ansible -m ping"].wall_s
        for method in med:
            m = med[method]
            rows.append(
                f"| {nodes} | {method} | {m.wall_s:.1f} | {m.controller_cpu_s:.1f} | "
                f"{m.controller_cpu_s / nodes:.3f} | {m.node_cpu_s:.1f} | {m.wall_s / ping_wall:.2f} | "
                f"{m.load_1m:.1f} |"
            )
        d = med["gpufleet drift"]
        parts = [f"{nodes} nodes: drift / ping = {d.wall_s / ping_wall:.2f} (target <= 1.5)"]
        if "naive playbook" in med:
            parts.append(f"naive / drift = {med['naive playbook'].wall_s / d.wall_s:.2f} (target >= 5)")
        if "drift without fabric" in med:
            fabric = d.wall_s / med["drift without fabric"].wall_s
            parts.append(f"drift with / without the fabric checks = {fabric:.2f} (target <= 1.2)")
        if "gpufleet watch" in med:
            w = med["gpufleet watch"]
            parts.append(
                f"watch / drift = {w.wall_s / d.wall_s:.2f} wall, "
                f"{w.controller_cpu_s / d.controller_cpu_s:.2f} controller CPU (target <= 1.3)"
            )
        if "gpufleet watch --act" in med and "gpufleet watch" in med:
            acting, plain = med["gpufleet watch --act"], med["gpufleet watch"]
            parts.append(
                f"watch --act / watch = {acting.controller_cpu_s / plain.controller_cpu_s:.2f} "
                "controller CPU (nothing to act on; target <= 1.1)"
            )
        if "clush probe" in med:
            parts.append(f"drift / clush = {d.wall_s / med['clush probe'].wall_s:.2f}")
        ping_cpu = med["ansible -m ping"].controller_cpu_s
        if BASELINE in med:
            base = med[BASELINE].controller_cpu_s
            parts.append(f"controller CPU baseline drift / ping = {base / ping_cpu:.2f}")
        cpu_ratio = d.controller_cpu_s / ping_cpu
        parts.append(f"controller CPU drift / ping = {cpu_ratio:.2f} (target <= {CPU_VS_PING_TARGET})")
        ratios.append("; ".join(parts))
    return "\n".join([*rows, "", *ratios, growth(results)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="32,128",
        help=f"fleet sizes, comma-separated (default 32,128; above {SCALE_FROM} nodes ping and drift only)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of each method per size (default 3)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="unmeasured runs of each method before the rounds (default 1)"
    )
    parser.add_argument("--subnet", default="127.0.90", help="loopback /24 for the bench fleets")
    parser.add_argument("--json", type=Path, help="also write every sample here")
    parser.add_argument("--baseline", type=Path, help="another checkout whose drift is timed too")
    parser.add_argument(
        "--methods",
        default=",".join(SHORT_NAMES),
        help=f"methods to time, comma-separated from {', '.join(SHORT_NAMES)} (ping and drift always run)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        methods = chosen_methods(args.methods)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.baseline is not None:
        tree = args.baseline.resolve()
        if not (tree / "src" / "gpufleet").is_dir():
            print(f"bench: --baseline {tree} has no src/gpufleet", file=sys.stderr)
            return 2
        RUNNERS[BASELINE] = baseline_drift(tree)
        methods = (*methods, BASELINE)
    if os.geteuid() != 0:
        print("bench: simulated nodes need namespaces: run as root", file=sys.stderr)
        return 2
    if "clush probe" in methods and shutil.which("clush", path=str(BIN)) is None:
        print(f"bench: clush is not in {BIN}: pip install clustershell (make bench does)", file=sys.stderr)
        return 2
    procs.become_subreaper()
    results: dict[int, dict[str, list[Sample]]] = {}
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        try:
            for nodes in sizes:
                timed = sized_methods(nodes, methods)
                results[nodes] = bench_size(nodes, args.rounds, args.subnet, Path(tmp), timed, args.warmup)
        except BenchError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
        finally:
            procs.reap_children(timeout=5.0)
    print()
    print(f"machine: {os.cpu_count()} CPUs, {os.uname().machine}, Python {sys.version.split()[0]}")
    print(table(results))
    if args.json:
        args.json.write_text(
            json.dumps(
                {n: {m: [s.__dict__ for s in v] for m, v in r.items()} for n, r in results.items()}, indent=1
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
