"""The environment of the playbook's run: the user's ANSIBLE_DEBUG never reaches it (its trace shares
stdout with ansible-runner's events), the user's ANSIBLE_VERBOSITY does. A real ansible-playbook run
through ansible-runner on localhost."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet import runner

PLAYBOOK = """
- name: Say what the run was given
  hosts: all
  gather_facts: false
  tasks:
    - name: Show the settings
      ansible.builtin.debug:
        msg: "debug={{ lookup('ansible.builtin.env', 'ANSIBLE_DEBUG') }} verbosity={{ ansible_verbosity }}"
"""


def test_the_playbook_runs_without_the_user_s_debug_and_with_their_verbosity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    (playbooks / "say.yml").write_text(PLAYBOOK, encoding="utf-8")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost: {ansible_connection: local}\n", encoding="utf-8")
    monkeypatch.setattr(runner, "PLAYBOOK_DIR", playbooks)
    monkeypatch.setenv("ANSIBLE_DEBUG", "1")
    monkeypatch.setenv("ANSIBLE_VERBOSITY", "2")
    result = runner.run_playbook(runner.RunOptions(playbook="say.yml", inventory=inventory))
    assert result.status == "successful"
    [task] = result.hosts["localhost"].tasks
    assert (task["outcome"], task["msg"]) == ("ok", "debug=False verbosity=2")
