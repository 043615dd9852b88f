"""plugins/callback/options_only_roles.py: the implicit role_complete of a role imported without tasks (for
its defaults and vars) is taken out of the play before it starts; a role with tasks keeps its own, every
task stays, and the imported variables still reach the tasks after the import (a real ansible-playbook)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PLAYBOOK = """\
- name: A play that imports a role for its variables, then one with tasks
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The options of opts
      ansible.builtin.import_role:
        name: opts
        tasks_from: options
    - name: A block around a second import
      block:
        - name: The options of more
          ansible.builtin.import_role:
            name: more
            tasks_from: options
    - name: A role with a task
      ansible.builtin.import_role:
        name: real
    - name: What the imports gave
      ansible.builtin.debug:
        msg: "seen={{ __opts_options.x }},{{ __more_options.y }}"
"""

ROLES = {
    "opts/defaults/main.yml": "opts_x: 41\n",
    "opts/vars/main.yml": '__opts_options:\n  x: "{{ opts_x + 1 }}"\n',
    "opts/tasks/options.yml": "[]\n",
    "more/defaults/main.yml": "more_y: seven\n",
    "more/vars/main.yml": '__more_options:\n  y: "{{ more_y }}"\n',
    "more/tasks/options.yml": "[]\n",
    "real/tasks/main.yml": "- name: The real role's task\n  ansible.builtin.debug:\n    msg: real ran\n",
}

# Every task of the compiled play (action and meta name), before and after the callback's play start.
PROBE = textwrap.dedent(
    """
    import json, sys
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.vars.manager import VariableManager
    from ansible.playbook import Playbook
    from ansible.playbook.block import Block
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()
    context.CLIARGS = ImmutableDict(tags=[], skip_tags=[])
    from ansible_collections.gpufleet.node.plugins.callback.options_only_roles import CallbackModule

    def tasks(blocks):
        for b in blocks:
            for part in (b.block, b.rescue, b.always):
                for t in part:
                    if isinstance(t, Block):
                        yield from tasks([t])
                    else:
                        yield t.action + ":" + str((t.args or {}).get("_raw_params") or t.get_name())

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=["localhost,"])
    manager = VariableManager(loader=loader, inventory=inventory)
    play = Playbook.load(sys.argv[1], variable_manager=manager, loader=loader).get_plays()[0]
    before = list(tasks(play.copy().compile()))
    taken = play.copy()
    CallbackModule().v2_playbook_on_play_start(taken)
    print(json.dumps({"before": before, "after": list(tasks(taken.compile()))}))
    """
)


def _project(tmp_path: Path) -> Path:
    for name, text in ROLES.items():
        path = tmp_path / "roles" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    return playbook


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".gpufleet" / "collections"),
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        **extra,
    }


def test_only_the_role_completes_of_the_roles_without_tasks_are_taken_out(tmp_path: Path) -> None:
    playbook = _project(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(playbook)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_env(tmp_path),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    before, after = seen["before"], seen["after"]
    # opts, more and real each end with one
    assert before.count("meta:role_complete") == 3, before
    assert after.count("meta:role_complete") == 1, after
    assert [t for t in before if t != "meta:role_complete"] == [t for t in after if t != "meta:role_complete"]
    real = next(i for i, t in enumerate(after) if t.endswith("The real role's task"))
    # real's own end is the one kept: after its task
    assert after.index("meta:role_complete") > real, after


def test_a_playbook_run_with_it_still_gets_the_imported_variables(tmp_path: Path) -> None:
    playbook = _project(tmp_path)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            str(playbook),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=_env(
            tmp_path,
            ANSIBLE_CALLBACKS_ENABLED="gpufleet.node.options_only_roles",
            ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "seen=42,seven" in proc.stdout, proc.stdout[-3000:]
    assert "real ran" in proc.stdout
