# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take out of a play the implicit end of a role imported for its variables only.

ansible-core ends every role it compiles into a play with an implicit ``meta: role_complete`` task, and
the linear strategy computes every host's variables for it (VariableManager.get_vars, ~1 ms of the
controller's main process each) and sends its task-start callbacks, per host. playbooks/tasks/plan_roles.yml
imports seven roles with ``tasks_from: options``, an entry point without tasks, for their defaults and
vars: seven such tasks per node and play, 224 of a 32-node drift's 313 variable computations (~0.25 CPU-s
of the main process, bench/README.md, issue 40). A role_complete marks the role done for a host only if
one of the role's tasks ran there (StrategyBase._execute_meta); a role without tasks has none, so its
role_complete does nothing and is dropped before the play starts. Every other task stays.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: options_only_roles
type: aggregate
short_description: Drop the implicit end of a role imported without tasks, for its variables only
description:
  - When a play starts, takes out the implicit C(role_complete) meta task that ansible-core adds after a
    role imported with an entry point that has no tasks (C(tasks_from) C(options), for the role's defaults
    and vars only, as C(playbooks/tasks/plan_roles.yml) imports seven roles). Such a task does nothing (no
    task of its role ran) but costs the controller a computation of every host's variables and a task
    start.
  - It changes nothing a playbook does or prints. gpufleet's C(ansible.cfg) enables it.
requirements:
  - enabled in C(callbacks_enabled) (gpufleet's C(ansible.cfg) does it)
"""

from ansible.playbook.block import Block
from ansible.playbook.task import Task
from ansible.plugins.callback import CallbackBase

_SECTIONS = ("pre_tasks", "tasks", "post_tasks")


def is_empty_role_end(entry):
    """A block holding only the implicit role_complete of a role that has no tasks."""
    if not isinstance(entry, Block) or entry.rescue or entry.always or len(entry.block) != 1:
        return False
    task = entry.block[0]
    role = getattr(entry, "_role", None)
    return (
        isinstance(task, Task)
        and getattr(task, "implicit", False)
        and task.action == "meta"
        and (task.args or {}).get("_raw_params") == "role_complete"
        and role is not None
        and not getattr(role, "_task_blocks", True)
    )


def without_empty_role_ends(entries):
    """``entries`` (a section of a play, or a block's tasks) without those blocks, at any depth."""
    kept = []
    for entry in entries or []:
        if is_empty_role_end(entry):
            continue
        if isinstance(entry, Block):
            entry.block = without_empty_role_ends(entry.block)
            entry.rescue = without_empty_role_ends(entry.rescue)
            entry.always = without_empty_role_ends(entry.always)
        kept.append(entry)
    return kept


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.node.options_only_roles"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_play_start(self, play):
        # the play ansible-core is about to compile and iterate (TaskQueueManager.run: the callback, then
        # the PlayIterator)
        for section in _SECTIONS:
            setattr(play, section, without_empty_role_ends(getattr(play, section)))
