"""A playbook run the way AWX runs a job slice on an execution node: ansible-runner's streaming protocol,
``ansible-runner transmit | ansible-runner worker | ansible-runner process``. The controller side packs a
private data directory (the project, the slice's inventory, the environment) into a stream; the worker
unpacks it into a directory of its own, runs ansible-playbook and streams the events back; ``process``
writes them as artifacts on the controller. Nothing the worker leaves on its side is read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from gpufleet import runner
from gpufleet.drift import DRIFT_FORKS

BIN = Path(sys.executable).parent


def sliced(names: list[str], slices: int) -> list[list[str]]:
    """The hosts of each slice, as AWX job slicing deals them out: host i to slice i % slices."""
    ordered = sorted(names)
    return [ordered[k::slices] for k in range(slices)]


def slice_inventory(inventory: Path, hosts: list[str], target: Path, vault_password_file: Path) -> None:
    """The inventory of one slice: only its hosts (and the leaf switches every slice reads), with the
    variables they had (AWX gives a slice an inventory of its hosts only)."""
    listed = subprocess.run(
        [
            str(BIN / "ansible-inventory"),
            "-i",
            str(inventory),
            "--vault-password-file",
            str(vault_password_file),
            "--list",
            "--yaml",
            "--export",
            "--limit",
            ",".join([*hosts, runner.SWITCH_GROUP]),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=runner.environment(forks=1),
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(listed.stdout, encoding="utf-8")


def private_data_dir(where: Path, inventory: Path, hosts: list[str], vault_password_file: Path) -> Path:
    """What the controller transmits: project/ (the playbooks and roles), inventory/, env/envvars."""
    project = where / "project"
    for part in ("playbooks", "roles"):
        shutil.copytree(runner.REPO_DIR / part, project / part, symlinks=True)
    shutil.copy(runner.REPO_DIR / "ansible.cfg", project / "ansible.cfg")
    slice_inventory(inventory, hosts, where / "inventory" / "hosts.yml", vault_password_file)
    env = where / "env"
    env.mkdir()
    # the execution environment: gpufleet's collection and Ansible's settings (runner.environment), its
    # ansible.cfg the project's own copy
    envvars = {**runner.environment(forks=DRIFT_FORKS), "ANSIBLE_CONFIG": "ansible.cfg"}
    (env / "envvars").write_text(json.dumps(envvars), encoding="utf-8")
    return where


Pipeline = list[subprocess.Popen[bytes]]


def run_streamed(
    private: Path, playbook: str, artifacts: Path, ident: str, vault_password_file: Path
) -> Pipeline:
    """Starts transmit | worker | process for one slice (wait on it with ``finish``)."""
    transmit = subprocess.Popen(
        [
            str(BIN / "ansible-runner"),
            "transmit",
            str(private),
            "-p",
            f"playbooks/{playbook}",
            "--ident",
            ident,
            "--cmdline",
            f"--vault-password-file {vault_password_file}",
        ],
        stdout=subprocess.PIPE,
    )
    worker = subprocess.Popen(
        [
            str(BIN / "ansible-runner"),
            "worker",
            "--private-data-dir",
            str(private.parent / f"{ident}-worker"),
            "--delete",
        ],
        stdin=transmit.stdout,
        stdout=subprocess.PIPE,
    )
    assert transmit.stdout is not None and worker.stdout is not None
    transmit.stdout.close()  # the worker holds the pipe now
    # process prints the playbook's output as it goes (an AWX job's stdout): kept beside the artifacts
    artifacts.mkdir(parents=True, exist_ok=True)
    with (artifacts / f"{ident}.stdout").open("wb") as stdout:
        process = subprocess.Popen(
            [str(BIN / "ansible-runner"), "process", str(artifacts), "--ident", ident],
            stdin=worker.stdout,
            stdout=stdout,
        )
    worker.stdout.close()
    return [transmit, worker, process]


def finish(started: Pipeline, timeout: float) -> None:
    """Waits for the whole pipeline of one slice; every process ends here, also when one failed."""
    try:
        for proc in started:
            proc.wait(timeout=timeout)
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # the worker exits with ansible-playbook's status (2 when a host failed); the stream's two ends with 0
    transmit, _, process = started
    assert (transmit.returncode, process.returncode) == (0, 0), [p.args for p in started if p.returncode]
