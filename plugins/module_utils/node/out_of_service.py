# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a node is already out of service, judged again under the run lock before a watch that acts
(C(playbooks/guardian_act.yml)) quarantines it: the drain role's record on the node (gpufleet took it
out: a gate that blocked it, an earlier quarantine), or its scheduler showing it drained for a reason that
is not gpufleet's (a person drained it on purpose). Either way the guardian leaves it as it is.

The record is read as drain_state reads it; the scheduler's answer (``scontrol show node``, read where the
drain role runs scontrol) is parsed by drain_state.parse_slurm_node and judged by drain_state.is_ours.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core import results
from ansible_collections.gpufleet.node.plugins.module_utils.node import drain_state

CHECK = "guardian.already_out"


def read_record(path):
    """The drain record's text on one line ("" when empty), or None when there is none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return " ".join(handle.read().split())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "record unreadable: %s" % exc


def already_out_check(record, record_path, slurm, node_name):
    """The guardian.already_out check. ``record``: the drain record's text (None: no record); ``slurm``:
    ``(state, reason)`` from the scheduler, or None when there is no scheduler to ask."""
    if record is not None:
        recorded = record or "no reason recorded"
        message = (
            "gpufleet already took this node out of service (%s, %s): a blocked gate or an earlier "
            "quarantine; the guardian leaves it as it is (the gate returns it)" % (recorded, record_path)
        )
        return results.check(CHECK, False, "drain record: %s" % recorded, "in service", "", message)
    if slurm is not None:
        state, reason = slurm
        if "DRAIN" in (state or "").upper() and not drain_state.is_ours(reason):
            message = (
                "Slurm shows %s %s for '%s', a reason that is not gpufleet's: a person took it out of "
                "service on purpose, and the guardian leaves it as it is"
                % (node_name, state, reason or "no reason")
            )
            return results.check(
                CHECK, False, "slurm: %s" % (reason or "no reason"), "in service", "", message
            )
    return results.check(CHECK, True, "in service", "in service", "", "the node is in service")
