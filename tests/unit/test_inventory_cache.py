"""src/gpufleet/inventory_cache.py: the preflight's ansible-inventory listing is kept for a static inventory
and served only while every input of it is unchanged; each input that can change it is changed here once,
and the next read must list again. An inventory whose listing depends on more than the key (a script, an
inventory plugin, a limit from a file, a playbook directory, vars plugins) is never kept."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gpufleet import inventory_cache, preflight, runner

NODES = "all:\n  children:\n    gpu_nodes:\n      hosts:\n        node01: {}\n        node02: {}\n"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GPUFLEET_INVENTORY_CACHE", raising=False)
    for name in inventory_cache.UNKEYED_ENV:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "state"


class Lister:
    """preflight._list stood in for: counts the listings made, and lists what the files say (each
    host with the text of every file of the inventory's tree), so a stale listing shows."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, inventory: Path, limit: str | None, env: dict[str, str]) -> dict[str, Any]:
        self.calls += 1
        root = inventory if inventory.is_dir() else inventory.parent
        texts = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}
        return {
            "_meta": {"hostvars": {"node01": {"files": texts, "limit": limit}}},
            "gpu_nodes": {"hosts": ["node01"]},
        }


@pytest.fixture
def lister(monkeypatch: pytest.MonkeyPatch) -> Lister:
    fake = Lister()
    monkeypatch.setattr(preflight, "_list", fake)
    return fake


def _inventory(tmp_path: Path) -> Path:
    (tmp_path / "inv").mkdir()
    path = tmp_path / "inv" / "inventory.yml"
    path.write_text(NODES)
    return path


def test_an_unchanged_inventory_is_listed_once_and_served_the_same(tmp_path: Path, lister: Lister) -> None:
    inventory = _inventory(tmp_path)
    first = preflight.read_inventory(inventory)
    again = preflight.read_inventory(inventory)
    assert lister.calls == 1
    assert again == first


def test_the_listing_served_is_ansible_inventory_s_own(tmp_path: Path, state: Path) -> None:
    inventory = _inventory(tmp_path)
    (inventory.parent / "group_vars").mkdir()
    (inventory.parent / "group_vars" / "gpu_nodes.yml").write_text("gpu_driver_version: '550.54'\n")
    listed = preflight.read_inventory(inventory)
    assert listed["_meta"]["hostvars"]["node01"]["gpu_driver_version"] == "550.54"
    assert len(list((state / "inventory-listings").glob("*.json"))) == 1
    assert preflight.read_inventory(inventory) == listed
    assert stat.S_IMODE((state / "inventory-listings").stat().st_mode) == 0o700


def test_a_changed_inventory_file_is_listed_again_even_with_its_size_and_mtime(
    tmp_path: Path, lister: Lister
) -> None:
    inventory = _inventory(tmp_path)
    preflight.read_inventory(inventory)
    before = inventory.stat()
    inventory.write_text(NODES.replace("node02", "node03"))  # same size
    os.utime(inventory, ns=(before.st_atime_ns, before.st_mtime_ns))
    listed = preflight.read_inventory(inventory)
    assert lister.calls == 2
    assert "node03" in listed["_meta"]["hostvars"]["node01"]["files"]["inventory.yml"]


@pytest.mark.parametrize("tree", ["group_vars", "host_vars"])
def test_a_vars_file_added_changed_or_removed_is_listed_again(
    tmp_path: Path, lister: Lister, tree: str
) -> None:
    inventory = _inventory(tmp_path)
    preflight.read_inventory(inventory)
    (inventory.parent / tree).mkdir()  # an empty tree: no file added yet
    preflight.read_inventory(inventory)
    assert lister.calls == 2
    vars_file = inventory.parent / tree / "node01.yml"
    vars_file.write_text("a: 1\n")
    preflight.read_inventory(inventory)
    vars_file.write_text("a: 2\n")
    listed = preflight.read_inventory(inventory)
    assert listed["_meta"]["hostvars"]["node01"]["files"][f"{tree}/node01.yml"] == "a: 2\n"
    nested = inventory.parent / tree / "gpu_nodes"
    nested.mkdir()
    (nested / "more.yml").write_text("b: 1\n")
    with_more = preflight.read_inventory(inventory)
    assert lister.calls == 5
    assert f"{tree}/gpu_nodes/more.yml" in with_more["_meta"]["hostvars"]["node01"]["files"]
    (nested / "more.yml").unlink()
    # the inputs are those of the listing with a: 2 again (an empty directory is no input): that one
    assert preflight.read_inventory(inventory) == listed
    assert lister.calls == 5


def test_a_directory_inventory_gaining_a_file_is_listed_again(tmp_path: Path, lister: Lister) -> None:
    inventory = _inventory(tmp_path).parent
    preflight.read_inventory(inventory)
    preflight.read_inventory(inventory)
    assert lister.calls == 1
    (inventory / "more.ini").write_text("[gpu_nodes]\nnode09\n")
    preflight.read_inventory(inventory)
    assert lister.calls == 2


def test_another_limit_environment_config_or_ansible_core_is_listed_again(
    tmp_path: Path, lister: Lister, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = _inventory(tmp_path)
    preflight.read_inventory(inventory)
    assert preflight.read_inventory(inventory, "node01")["_meta"]["hostvars"]["node01"]["limit"] == "node01"
    assert lister.calls == 2
    monkeypatch.setenv("ANSIBLE_INVENTORY_IGNORE", "~, .orig")
    preflight.read_inventory(inventory)
    assert lister.calls == 3
    # a connection's setting is no input of the listing (a run's own ssh ControlPath directory)
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", str(tmp_path / "cp-1"))
    preflight.read_inventory(inventory)
    assert lister.calls == 3
    config = tmp_path / "ansible.cfg"
    config.write_text(runner.ANSIBLE_CFG.read_text())
    monkeypatch.setattr(runner, "ANSIBLE_CFG", config)
    preflight.read_inventory(inventory)  # another ansible.cfg
    config.write_text(config.read_text() + "\n# changed\n")
    preflight.read_inventory(inventory)  # the same one, changed
    assert lister.calls == 5
    release = tmp_path / "ansible" / "release.py"
    release.parent.mkdir()
    release.write_text("__version__ = '2.21.0'\n")
    assert inventory_cache.ansible_release() is not None
    monkeypatch.setattr(inventory_cache, "ansible_release", lambda: release)
    preflight.read_inventory(inventory)
    release.write_text("__version__ = '2.21.1'\n")
    preflight.read_inventory(inventory)
    assert lister.calls == 7
    preflight.read_inventory(inventory)
    assert lister.calls == 7


def test_an_inventory_that_changes_while_it_is_listed_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = _inventory(tmp_path)
    calls = []

    def changing(path: Path, limit: str | None, env: dict[str, str]) -> dict[str, Any]:
        calls.append(path)
        listed = {
            "_meta": {"hostvars": {"node01": {"text": path.read_text()}}},
            "gpu_nodes": {"hosts": ["node01"]},
        }
        path.write_text(NODES.replace("node02", "node03"))
        return listed

    monkeypatch.setattr(preflight, "_list", changing)
    preflight.read_inventory(inventory)
    inventory.write_text(NODES)  # back as it was before the listing
    listed = preflight.read_inventory(inventory)
    assert len(calls) == 2
    assert "node02" in listed["_meta"]["hostvars"]["node01"]["text"]


@pytest.mark.parametrize(
    "case", ["script", "plugin", "directory with a plugin", "limit from a file", "playbook dir", "off"]
)
def test_an_inventory_whose_listing_may_depend_on_more_is_never_kept(
    tmp_path: Path, lister: Lister, state: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    inventory = _inventory(tmp_path)
    limit = None
    if case == "script":
        inventory.chmod(0o755)
    elif case == "plugin":
        inventory.write_text("plugin: ansible.builtin.constructed\nstrict: true\n")
    elif case == "directory with a plugin":
        (inventory.parent / "constructed.yml").write_text("---\nplugin: constructed\n")
        inventory = inventory.parent
    elif case == "limit from a file":
        (tmp_path / "hosts.txt").write_text("node01\n")
        limit = f"@{tmp_path / 'hosts.txt'}"
    elif case == "playbook dir":
        monkeypatch.setenv("ANSIBLE_PLAYBOOK_DIR", str(tmp_path))
    else:
        monkeypatch.setenv("GPUFLEET_INVENTORY_CACHE", "0")
    preflight.read_inventory(inventory, limit)
    preflight.read_inventory(inventory, limit)
    assert lister.calls == 2
    assert not (state / "inventory-listings").exists()


def test_vars_plugins_in_the_configuration_turn_it_off(
    tmp_path: Path, lister: Lister, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "ansible.cfg"
    config.write_text(runner.ANSIBLE_CFG.read_text() + "vars_plugins_enabled = host_group_vars, mine\n")
    monkeypatch.setattr(runner, "ANSIBLE_CFG", config)
    inventory = _inventory(tmp_path)
    preflight.read_inventory(inventory)
    preflight.read_inventory(inventory)
    assert lister.calls == 2


def test_a_damaged_or_foreign_entry_is_listed_again_and_the_oldest_go(
    tmp_path: Path, lister: Lister, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = _inventory(tmp_path)
    preflight.read_inventory(inventory)
    (entry,) = (state / "inventory-listings").glob("*.json")
    entry.write_text("{not json")
    preflight.read_inventory(inventory)
    kept = json.loads(entry.read_text())
    kept["key"]["limit"] = "other"  # a name that collides with another key's
    entry.write_text(json.dumps(kept))
    preflight.read_inventory(inventory)
    assert lister.calls == 3
    monkeypatch.setattr(inventory_cache, "MAX_KEPT", 2)
    for limit in ("a", "b", "c"):
        preflight.read_inventory(inventory, limit)
    assert len(list((state / "inventory-listings").glob("*.json"))) == 2


def test_an_unwritable_state_dir_only_lists_every_time(
    tmp_path: Path, lister: Lister, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "file"))
    inventory = _inventory(tmp_path)
    assert preflight.read_inventory(inventory) == preflight.read_inventory(inventory)
    assert lister.calls == 2


def test_the_vars_beside_a_linked_inventory_and_beside_its_target_are_both_inputs(
    tmp_path: Path, lister: Lister
) -> None:
    target = _inventory(tmp_path)
    (tmp_path / "site").mkdir()
    link = tmp_path / "site" / "inventory.yml"
    link.symlink_to(target)
    preflight.read_inventory(link)
    (tmp_path / "site" / "group_vars").mkdir()  # ansible reads this one: beside the link
    (tmp_path / "site" / "group_vars" / "all.yml").write_text("a: 1\n")
    preflight.read_inventory(link)
    assert lister.calls == 2
    (target.parent / "group_vars").mkdir()
    (target.parent / "group_vars" / "all.yml").write_text("a: 1\n")
    preflight.read_inventory(link)
    assert lister.calls == 3
    preflight.read_inventory(link)
    assert lister.calls == 3
