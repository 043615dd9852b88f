"""plugins/callback/payload_cache.py: a module's AnsiballZ payload built by one ansible-playbook run is
used by the next instead of built again; a changed module_util is a new cache; a folder others can
write to is not used."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ansible_collections.gpufleet.node.plugins.callback import payload_cache

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.stat: {path: /}
    # a gpufleet module that runs on the controller's own host (fleet_versions is an action plugin now)
    - gpufleet.node.run_lock:
        state: released
        holder: {id: payload-cache-test}
        path: "{{ playbook_dir }}/lock.json"
"""


def _run(tmp_path: Path, local_tmp: Path) -> str:
    """One playbook run with ansible's debug log, which says when it builds a payload or reuses one."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(local_tmp))
    env.update(ANSIBLE_DEBUG="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".gpufleet" / "collections"))
    ansible_playbook = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "ansible-playbook"
    # The venv's own Python: interpreter discovery may find a pyenv shim that does not run.
    python = f"ansible_python_interpreter={ansible_playbook.parent / 'python'}"
    done = subprocess.run(
        [str(ansible_playbook), "-i", "localhost,", "-c", "local", "-e", python, str(playbook)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_second_run_reuses_the_payloads_the_first_built(tmp_path: Path) -> None:
    local_tmp = tmp_path / "local-tmp"
    first = _run(tmp_path, local_tmp)
    assert first.count("ANSIBALLZ: Creating module") == 2, "the first run builds both payloads"
    store = local_tmp / payload_cache.FOLDER / payload_cache.content_key()
    kept = sorted(p.name for p in store.iterdir())
    assert kept == [
        "ansible.modules.stat-ZIP_DEFLATED-none",
        "ansible_collections.gpufleet.node.plugins.modules.run_lock-ZIP_DEFLATED-none",
    ]
    assert oct(store.parent.stat().st_mode & 0o777) == "0o700"
    second = _run(tmp_path, local_tmp)
    assert "ANSIBALLZ: Creating module" not in second
    assert second.count("ANSIBALLZ: using cached module") == 2


def test_a_changed_module_util_is_another_cache(tmp_path: Path) -> None:
    root = tmp_path / "collection"
    for part in ("plugins/modules", "plugins/module_utils"):
        shutil.copytree(REPO / part, root / part)
    before = payload_cache.content_key(root)
    assert payload_cache.content_key(root) == before
    util = next((root / "plugins" / "module_utils").rglob("parsing.py"))
    util.write_text(util.read_text() + "\n# changed\n")
    assert payload_cache.content_key(root) != before


def test_a_folder_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not payload_cache.private_folder(shared)
    assert payload_cache.private_folder(tmp_path / "mine")
    assert oct((tmp_path / "mine").stat().st_mode & 0o777) == "0o700"


def test_only_gpufleets_and_ansible_cores_payloads_are_kept() -> None:
    assert payload_cache.kept("ansible_collections.gpufleet.node.plugins.modules.gpu_facts-ZIP_DEFLATED-none")
    assert payload_cache.kept("ansible.modules.stat-ZIP_DEFLATED-none")
    assert not payload_cache.kept("ansible.legacy.mine-ZIP_DEFLATED-none")
    assert not payload_cache.kept("ansible_collections.other.col.plugins.modules.x-ZIP_DEFLATED-none")
    assert not payload_cache.kept("ansible.modules.stat-ZIP_DEFLATED-none.lock")
