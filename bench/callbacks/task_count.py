# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/gate_cpu.py's counter: every task result per host and play (ok, changed, failed, skipped,
unreachable alike: a skipped task still costs a worker fork), added to the JSON file named by
GPUFLEET_BENCH_TASKS when the playbook ends. Not part of gpufleet: the bench enables it for its runs."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: task_count
type: aggregate
short_description: Count each host's task results per play (bench/gate_cpu.py)
description:
  - Adds every host's task results, per play, to the JSON file named by GPUFLEET_BENCH_TASKS.
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_count"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.play = ""
        self.counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self.play = play.get_name()

    def _count(self, result: Any, outcome: str) -> None:
        per_play = self.counts[result._host.get_name()][self.play]
        per_play[outcome] = per_play.get(outcome, 0) + 1

    def v2_runner_on_ok(self, result: Any) -> None:
        self._count(result, "ok")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._count(result, "failed")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._count(result, "unreachable")

    def v2_playbook_on_stats(self, stats: Any) -> None:
        target = os.environ.get("GPUFLEET_BENCH_TASKS")
        if not target:
            return
        path = Path(target)
        known: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        for host, plays in self.counts.items():
            for play, outcomes in plays.items():
                into = known.setdefault(host, {}).setdefault(play, {})
                for outcome, count in outcomes.items():
                    into[outcome] = into.get(outcome, 0) + count
        path.write_text(json.dumps(known, indent=1), encoding="utf-8")
