"""The collection as a user gets it: built with ansible-galaxy, installed from its tarball into an empty
collections path, and a playbook run by its FQCN against a simulated node, nothing of the checkout on
Ansible's paths (subnet 127.0.77)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from gpufleet_sim.fleet import Fleet

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("collection")
    paths = {"tarball": where, "path": where / "path", "cwd": where}
    built = _ansible(
        "ansible-galaxy",
        "collection",
        "build",
        "--output-path",
        str(where / "dist"),
        str(REPO),
        installed=paths,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [paths["tarball"]] = (where / "dist").glob("gpufleet-node-*.tar.gz")
    # --force: a gpufleet.node on another path (a checkout's) must not make the install a no-op
    done = _ansible(
        "ansible-galaxy",
        "collection",
        "install",
        "--force",
        "--no-deps",
        "-p",
        str(paths["path"]),
        str(paths["tarball"]),
        installed=paths,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (paths["path"] / "ansible_collections" / "gpufleet" / "node" / "MANIFEST.json").is_file(), (
        done.stdout
    )
    return paths


def _env(installed: dict[str, Path]) -> dict[str, str]:
    """Ansible with only the installed collection: no checkout ansible.cfg, roles or collections."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(installed["path"]),
        ANSIBLE_CONFIG=str(installed["cwd"] / "none.cfg"),
        ANSIBLE_NOCOLOR="1",
        PATH=f"{BIN}:{env.get('PATH', '')}",
    )
    return env


def test_the_tarball_holds_the_collection_and_not_the_project(installed: dict[str, Path]) -> None:
    with tarfile.open(installed["tarball"]) as tar:
        names = set(tar.getnames())
    assert {
        "MANIFEST.json",
        "plugins/modules/gpu_facts.py",
        "playbooks/facts.yml",
        "roles/gpu_power/tasks/main.yml",
    } <= names
    assert not [n for n in names if n.split("/")[0] in ("tests", "src", "bench", "molecule", ".venv")]


def _ansible(tool: str, *args: str, installed: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """An ansible tool run from an empty folder with only the installed collection (_env)."""
    return subprocess.run(
        [str(BIN / tool), *args],
        env=_env(installed),
        cwd=installed["cwd"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_playbook_runs_by_its_fqcn_from_the_installed_collection(
    installed: dict[str, Path], fleet_factory: object
) -> None:
    fleet: Fleet = fleet_factory(nodes=1, subnet="127.0.77")  # type: ignore[operator]
    listed = _ansible("ansible-galaxy", "collection", "list", "gpufleet.node", installed=installed)
    assert str(installed["path"]) in listed.stdout and str(REPO) not in listed.stdout, listed.stdout
    run = _ansible(
        "ansible-playbook", "-v", "-i", str(fleet.inventory_path), "gpufleet.node.facts", installed=installed
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert "node01" in output and "failed=0" in output and "unreachable=0" in output
    # the module ran on the node and read its 16 GPUs (their UUIDs in the verbose result)
    assert output.count("GPU-") >= 16, output[-2000:]
    assert str(REPO / "plugins") not in output
