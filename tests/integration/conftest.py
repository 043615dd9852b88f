"""Simulated fleets for integration tests; each test module gets its own, on its own subnet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpufleet_sim.fleet import Fleet, FleetConfig

from gpufleet import cli, procs, runner
from tests.integration.scheduling import HeaviestFirst


def pytest_configure(config: pytest.Config) -> None:
    if os.geteuid() != 0:
        raise pytest.UsageError("integration tests start simulated nodes in namespaces: run them as root")
    # Orphans of the processes tests start (ssh ControlPersist masters, the sim supervisor)
    # come back to this process, which reaps them, instead of to a PID 1 that does not.
    procs.become_subreaper()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> HeaviestFirst:
    """Files stay on one worker, molecule's scenarios spread, the heaviest start first (scheduling.py)."""
    return HeaviestFirst(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    procs.reap_children(timeout=5.0)


def run_on(
    fleet: Fleet, report_dir: Path, *command: str, inventory: Path | None = None
) -> tuple[int, dict[str, Any]]:
    """`gpufleet <command>` against this fleet's inventory (or ``inventory``) and vault: (exit
    status, report.json)."""
    code = cli.main(
        [
            *command,
            "--inventory",
            str(inventory or fleet.inventory_path),
            "--vault-password-file",
            str(fleet.vault_password_file),
            "--report-dir",
            str(report_dir),
        ]
    )
    promtool_passes(report_dir / "gpufleet.prom")
    return code, json.loads((report_dir / "report.json").read_text())


def promtool_passes(path: Path) -> None:
    """Every command's Prometheus file, as node_exporter would read it, passes `promtool check metrics`."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make setup` installs Debian's prometheus package"
    done = subprocess.run(
        [promtool, "check", "metrics"], input=path.read_text(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{path}: {done.stdout}{done.stderr}"


def node_hosts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's nodes (the leaf switches every run reads are hosts of the report too)."""
    return {name: host for name, host in report["hosts"].items() if not name.startswith("leaf")}


def node_ssh(
    fleet: Fleet, address: str, command: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Runs a shell command on a simulated node through its own sshd, the host key checked."""
    argv = ["ssh", "-i", str(fleet.client_key), "-o", f"UserKnownHostsFile={fleet.known_hosts}"]
    argv += ["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", "2222", f"root@{address}"]
    done = subprocess.run([*argv, command], capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"{command} on {address}: {done.stderr}"
    return done


# what a passed gate leaves on a node before it starts the instances
GATE_MARKERS = ("/run/gpufleet/thermal-gate-passed", "/run/gpufleet/gate-passed")
INSTANCES = ("glm52", "kimik3")


def serve_as_a_passed_gate_leaves(fleet: Fleet, names: list[str]) -> None:
    """The nodes as a passed gate leaves them, without a gate's cost (its health reads and burn-in):
    the units installed and pinned by the gate's own steps, both markers written, both instances
    started."""
    result = runner.run_playbook(
        runner.RunOptions(
            playbook="post_maintenance.yml",
            inventory=fleet.inventory_path,
            limit=",".join(names),
            tags="nccl_topology,gpu_pinning,inference_service",
            vault_password_file=fleet.vault_password_file,
        )
    )
    failed = {n: h.failure_message() for n, h in result.hosts.items() if h.failed or h.unreachable}
    assert failed == {}
    start = [f"mkdir -p /run/gpufleet && touch {' '.join(GATE_MARKERS)}"]
    start += [f"systemctl start vllm-{i}.service" for i in INSTANCES]
    addresses = json.loads(fleet.fleet_file.read_text())["nodes"]
    for name in names:
        node_ssh(fleet, addresses[name]["address"], " && ".join(start))


GPUFLEET = Path(sys.executable).parent / "gpufleet"


def gate_process(
    fleet: Fleet, tmp_path: Path, report_dir: Path, burn_in_seconds: int
) -> subprocess.Popen[str]:
    """`gpufleet gate --verbose` as a process of its own, for a test that signals it: its per-task lines
    (stdout, stderr with them) tell where the gate is; its state directory is the test's."""
    argv = [str(GPUFLEET), "gate", "--verbose", "--burn-in-seconds", str(burn_in_seconds)]
    argv += [
        "--inventory",
        str(fleet.inventory_path),
        "--vault-password-file",
        str(fleet.vault_password_file),
    ]
    argv += ["--report-dir", str(report_dir)]
    env = dict(os.environ, GPUFLEET_STATE_DIR=str(tmp_path / "state"))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def leftovers(root: Path) -> list[str]:
    """Processes still running from a fleet directory (looked up, never killed by name)."""
    found = []
    marker = str(root).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            continue
    return found


# Each test file starts its own fleet, on its own subnet, and stops it when its tests are done. A pool of
# fleets shared by the files of a worker, reset between them, was measured and not built (2026-12-06,
# Fleet.up + Fleet.stop, 2 cores at load 8-9): 2.4-3.4 s for 1 node, 2.7 s for 2 (plain or Slurm),
# 3.0 s for 3, 7.9 s for 8 Slurm nodes, 15.1 s for 14; ~77 worker-seconds over the suite's 21 fleets,
# under 3 % of the stage. Most of it is per node (its directory, sshd, tool server, BMC, boot units,
# Slurm registration), which a reset restores by restarting the node all the same: sharing would save
# the ~2 s fixed part (client key, tool client build, leaves, Slurm daemons) a reuse, and tie every
# file's outcome to the reset's completeness. The time is in what the tests run on the fleets.
@pytest.fixture(scope="module")
def fleet_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    fleets: list[Fleet] = []

    def start(nodes: int, subnet: str, profile: str = "b300-16", slurm: bool = False) -> Fleet:
        root = tmp_path_factory.mktemp("sim")
        fleet = Fleet(root)
        fleet.up(FleetConfig(nodes=nodes, profile=profile, subnet=subnet, slurm=slurm))
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop()
        assert leftovers(fleet.root) == [], "a simulated node outlived its fleet"
        shutil.rmtree(fleet.root, ignore_errors=True)
