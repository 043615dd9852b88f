#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_lock
short_description: Hold the node for one changing run, whichever controller starts it
version_added: "0.3.0"
description:
  - The run lock every changing playbook (provision, the gate, drift --fix) takes on the node before its
    first change and releases after its last. It lives on the node, so two controllers, two accounts or
    AWX beside a laptop see the same lock.
  - V(held) puts the holder's record in O(path) atomically with link(2), so of two runs racing one gets
    it. The run that holds it may take it again. Another run's record fails the module, naming its holder
    (command, user, controller, pid, start), unless O(break_lock) is set.
  - The record is kept where only root writes. Every directory from C(/) to the one of O(path) must be a
    directory owned by root that no one else may write to (an ancestor may be world-writable with the
    sticky bit); the last is made, mode 0755, when missing. Otherwise the module fails naming it.
  - What is at O(path) is looked at without following a link and without opening anything but a regular,
    root-owned file with one link and a record's size; its content is never quoted. Anything else there
    (a symbolic link, dangling or not, a FIFO, a directory, a device, another owner's file, a file that is
    not a holder's record) fails the module naming what it is; O(break_lock) moves it aside. No step
    waits on what it finds.
  - A holder's record that an older gpufleet left in C(/run/lock/gpufleet-run.json) (its run still going)
    is honoured the same way; nothing else in that world-writable directory is read.
  - Every refusal is made before anything changes and says so (C(input_error), the exit status 2 of an
    input refused).
  - V(released) removes the record when the O(holder) of that C(id) holds it, and leaves another run's
    record, or anything else, alone.
options:
  state:
    description: Take (V(held)) or give back (V(released)) the node.
    type: str
    choices: [held, released]
    default: held
  holder:
    description:
      - The run, C({id, user, command, controller, pid, started}); only C(id) is needed to release.
    type: dict
    required: true
  break_lock:
    description:
      - Take the node even when another run's record, or anything that is not a record, is at O(path)
        (that run is gone); what was there is moved aside, beside the lock, and named in a warning.
    type: bool
    default: false
  path:
    description:
      - The lock's record on the node. Under /run, so a reboot ends it with the runs it held; in a
        directory only root writes to (see above).
    type: path
    default: /run/gpufleet/run-lock.json
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: none
    details: A run in check mode changes nothing and takes no lock; the playbooks skip the task.
  diff_mode:
    description: Will return details on what has changed (or would change in check_mode) in diff mode.
    support: none
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Hold the node for this run
  gpufleet.node.run_lock:
    holder: {id: "laptop1:4242:99", user: alice, command: gpufleet gate, controller: laptop1, pid: 4242,
             started: "2026-05-01T10:00:00Z"}
"""

RETURN = r"""
holder:
  description: With V(held) refused, the run that holds the node; with V(released), the run that holds it
    instead of O(holder) (null when none).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import hint
from ansible_collections.gpufleet.node.plugins.module_utils.node import run_lock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["held", "released"], default="held"),
            holder=dict(type="dict", required=True),
            break_lock=dict(type="bool", default=False),
            path=dict(type="path", default=run_lock.DEFAULT_PATH),
        ),
        supports_check_mode=False,
    )
    holder, path = module.params["holder"], module.params["path"]
    if module.params["state"] == "released":
        if not holder.get("id"):
            module.fail_json(msg="holder.id is required to release the node", input_error=True)
        try:
            released = run_lock.release(path, holder["id"])
        except run_lock.Refused as exc:
            module.fail_json(msg=str(exc), holder=None)
        module.exit_json(**released)
    missing = [key for key in run_lock.HOLDER_KEYS if holder.get(key) in (None, "")]
    if missing:
        module.fail_json(
            msg="holder lacks %s; give %s" % (", ".join(missing), ", ".join(run_lock.HOLDER_KEYS))
        )
    try:
        taken = run_lock.take(path, holder, module.params["break_lock"])
    except run_lock.Refused as exc:
        # refused before this run changed anything on the node: the exit status of a refused input (2)
        module.fail_json(msg=str(exc), holder=exc.holder or None, input_error=True)
    for note in taken["notes"]:
        module.warn(note)
    module.exit_json(changed=taken["changed"], holder=None, hints=[hint(n) for n in taken["notes"]])


if __name__ == "__main__":
    main()
