# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.node.drain_reason: a failed task's result -> the drain reason that names its failed checks.

The text is built in one place, module_utils/node/drain_state.py (drain_reason: length, "+N more", the
characters a Slurm reason keeps); this filter only takes the checks and the message out of a task result
(``ansible_failed_result`` in a rescue), a loop's items included. Runs on the controller.
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core.results import task_message
from ansible_collections.gpufleet.node.plugins.module_utils.node.drain_state import drain_reason as build


def drain_reason(result, what="gate", task=None):
    """The reason for ``result`` (a task result: its ``checks``, each loop item's too); without a failed
    check, ``task`` (the failed task's name) and the result's message."""
    result = result if isinstance(result, dict) else {}
    checks = list(result.get("checks") or [])
    for item in result.get("results") or []:
        if isinstance(item, dict):
            checks.extend(item.get("checks") or [])
    message = task_message(result)
    fallback = f"{task}: {message}" if task else message
    return build(what, checks, fallback)


class FilterModule:
    def filters(self):
        return {"drain_reason": drain_reason}
