#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: remediation_history
short_description: Read or append the node's remediation history (quarantines, resets, reboots, marks)
version_added: "0.1.0"
description:
  - The node's own record of what a watch that acts (C(gpufleet watch --act)) did to it and why - each
    quarantine, GPU reset, reboot, the gate's verdict after it, a replace-hardware mark and an operator's
    clearing of it. It lives on the node, so it survives a new controller, and every report shows it.
  - The file at O(path) is a JSON object whose C(events) list holds the events, oldest first; at most the
    newest 200 events are kept. It is written atomically (a temporary file in the same directory renamed
    over it, mode 0644; a link at the path is replaced, never written through) under a lock of its
    directory, so two appends never lose one another's event. Its directory is made (0755) when missing.
  - V(read) returns the events (none when the file is missing). V(append) validates O(events) (every fault
    named at once, before anything is written), gives each its time (now, UTC) where it has none and O(run)
    where it names none, and appends them.
  - A file that cannot be read or is not a history (not JSON, no C(events) list, an event of another
    shape, a FIFO, a link, larger than 8 MiB) fails the module naming the file and why; nothing is written
    over it.
  - A node whose latest V(replace_hardware) event has no later V(cleared) one is marked "replace hardware"
    (C(replace_hardware)); M(gpufleet.node.node_health) and M(gpufleet.node.watch) then fail
    C(guardian.replace_hardware) on it until C(gpufleet release) appends V(cleared).
options:
  state:
    description: Return the history (V(read)) or append O(events) to it (V(append)).
    type: str
    choices: [read, append]
    default: read
  path:
    description: The history file on the node (the inventory's C(guardian_history_path)).
    type: path
    default: /var/lib/gpufleet/remediation-history.json
  events:
    description:
      - With V(append), the events to append, in order. Each is a dict of C(class) (a failure class of
        lowercase letters, digits and C(_), as C(gpu_lost), C(row_remap), C(xid)), C(action) (V(quarantine),
        V(gpu_reset), V(reboot), V(gate_passed), V(gate_failed), V(replace_hardware) or V(cleared)),
        C(outcome) (V(ok) or V(failed)), and optionally C(time) (ISO UTC, C(2026-12-06T20:31:05Z); now when
        absent), C(checks) (the failed checks' names, at most 256), C(detail) (one line, at most 500
        characters) and C(run) (the run's id). Any other key is refused.
    type: list
    elements: dict
    default: []
  run:
    description: The run's id, given to each appended event that names none.
    type: str
    default: ""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: V(append) reports changed and returns the history it would write; nothing is written.
  diff_mode:
    description: Will return details on what has changed (or would change) in diff mode.
    support: none
author:
  - gpufleet developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the node's remediation history
  gpufleet.node.remediation_history:
  register: history

- name: Record a quarantine
  gpufleet.node.remediation_history:
    state: append
    run: "{{ gpufleet_run.id }}"
    events:
      - class: row_remap
        action: quarantine
        outcome: ok
        checks: ["health.row_remap_pending[GPU-5d3f]"]
        detail: "gpufleet watch: health.row_remap_pending[GPU-5d3f] true"

- name: Clear the replace-hardware mark after the repair
  gpufleet.node.remediation_history:
    state: append
    events:
      - {class: row_remap, action: cleared, outcome: ok, detail: "GPU 3 replaced, RMA 4711"}
"""

RETURN = r"""
history:
  description:
    - The node's events, oldest first (with V(append), after the new ones; in check mode, what it would be).
    - Each has C(time), C(class), C(action), C(outcome), C(checks), C(detail) and C(run).
  returned: success
  type: list
  elements: dict
  sample:
    - {"time": "2026-12-06T20:31:05Z", "class": "row_remap", "action": "quarantine", "outcome": "ok",
       "checks": ["health.row_remap_pending[GPU-5d3f]"], "detail": "gpufleet watch: ...", "run": "a1b2"}
replace_hardware:
  description:
    - The latest V(replace_hardware) event with no later V(cleared) one; null when the node is not marked.
  returned: success
  type: dict
added:
  description: The events appended (with their time and run); empty with V(read).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.node import remediation_history


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["read", "append"], default="read"),
            path=dict(type="path", default=remediation_history.DEFAULT_PATH),
            events=dict(type="list", elements="dict", default=[]),
            run=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"]
    if p["state"] == "read":
        if p["events"]:
            module.fail_json(msg="events are appended with state=append, not read", input_error=True)
        try:
            history = remediation_history.read(path)
        except remediation_history.HistoryError as exc:
            module.fail_json(msg="%s; nothing was changed" % exc)
        module.exit_json(
            changed=False,
            history=history,
            added=[],
            replace_hardware=remediation_history.replace_hardware_pending(history),
        )
    try:
        added = remediation_history.new_events(p["events"], p["run"])
    except ValueError as exc:
        module.fail_json(msg="Refusing to append to %s: %s" % (path, exc), input_error=True)
    try:
        history = remediation_history.append(path, added, check_mode=module.check_mode)
    except remediation_history.HistoryError as exc:
        module.fail_json(msg="%s; nothing was appended" % exc)
    module.exit_json(
        changed=True,
        history=history,
        added=added,
        replace_hardware=remediation_history.replace_hardware_pending(history),
    )


if __name__ == "__main__":
    main()
