# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Collects every host's results into one JSON file for gpufleet's report."""

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report
type: aggregate
short_description: Collect per-host results, diffs, changes and checks for the gpufleet report
description:
  - Records, per host, what each task reported - outcome, changed, diff, and gpufleet's own result
    keys (C(changes), C(checks), C(hints), C(reboot_required), C(override)) and C(gpufleet_*) facts -
    and writes them as one JSON document when the play ends.
  - gpufleet builds report.json, report.md and the Prometheus textfile from that document, so
    nothing parses Ansible's screen output. It works the same under ansible-playbook, ansible-runner
    and AWX.
  - The boot files of the roles C(rdma_link), C(rdma_qos) and C(gpu_power) are written by their modules,
    which report them in C(changes) under the names C(gpufleet drift) uses, like every other setting.
requirements:
  - enable in configuration (C(callbacks_enabled = gpufleet.node.fleet_report))
options:
  output_path:
    description: Where to write the JSON document. Nothing is written when unset.
    type: path
    env:
      - name: GPUFLEET_RESULTS_FILE
    ini:
      - section: gpufleet_fleet_report
        key: output_path
"""

import json
import os

from ansible.plugins.callback import CallbackBase
from ansible_collections.gpufleet.node.plugins.module_utils.results import task_message

_KEYS = ("changes", "checks", "hints", "reboot_required")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.node.fleet_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._hosts = {}
        self._play = ""

    def _host(self, name):
        return self._hosts.setdefault(
            name,
            {"failed": False, "unreachable": False, "changed": 0, "facts": {}, "tasks": []},
        )

    def _record(self, result, outcome):
        host = self._host(result._host.get_name())
        res = result._result
        parts = [res, *[r for r in res.get("results") or [] if isinstance(r, dict)]]
        entry = {
            "task": result._task.get_name(),
            "action": result._task.action,
            "outcome": outcome,
            "changed": bool(res.get("changed")),
            "play": self._play,
            "msg": task_message(res),
        }
        for key in _KEYS:
            values = [p.get(key) for p in parts if p.get(key)]
            if values:
                entry[key] = any(values) if key == "reboot_required" else [v for vs in values for v in vs]
        if res.get("input_error"):
            entry["input_error"] = True
        if res.get("override"):
            entry["override"] = res["override"]
        diffs = [p["diff"] for p in parts if p.get("diff")]
        if diffs:
            entry["diff"] = diffs
        facts = res.get("ansible_facts") or {}
        host["facts"].update({k: v for k, v in facts.items() if k.startswith("gpufleet_")})
        if outcome == "ok" and entry["changed"]:
            host["changed"] += 1
        if outcome == "failed" and not result._task.ignore_errors:
            host["failed"] = True
        if outcome == "unreachable":
            host["unreachable"] = True
        host["tasks"].append(entry)

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_playbook_on_stats(self, stats):
        path = self.get_option("output_path")
        if not path:
            return
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"hosts": self._hosts}, handle, default=str)
        os.replace(tmp, path)
