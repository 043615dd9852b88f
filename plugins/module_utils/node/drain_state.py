# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether gpufleet left a node out of service: the drain role's record on the node, or, without one
(a controller killed between its record and its drain is the other way round, a record lost with a
reinstalled disk this way), the scheduler showing the node drained for a reason that names gpufleet.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

from ansible_collections.gpufleet.node.plugins.module_utils.core import results

CHECK = "drain.left_drained"
# The drain role's reasons all name gpufleet ("gpufleet drift --fix", "gpufleet gate (...)").
OUR_REASON = "gpufleet"


def _left(value, message):
    """``drain.left_drained``: gpufleet left the node out of service (or whether it did is unknown)."""
    return results.check(CHECK, False, value, "in service", "", message)


def from_record(path):
    """The failed check when the drain role's record is on the node, else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            record = " ".join(handle.read().split())
    except FileNotFoundError:
        return None
    except OSError as exc:
        record = "record unreadable: %s" % exc
    return _left(
        record or "drained",
        "gpufleet took this node out of service (%s, %s) and did not return it: see why the last run stopped "
        "(its report), then gpufleet drift --fix or the gate returns it"
        % (record or "no reason recorded", path),
    )


def parse_slurm_node(text):
    """``(state, reason)`` from `scontrol show node <name>` (reason None when it gives none);
    ValueError when the output holds no State=."""
    state = reason = None
    for line in text.splitlines():
        for word in line.split():
            if word.startswith("State=") and state is None:
                state = word[len("State=") :]
        stripped = line.strip()
        if stripped.startswith("Reason="):
            # Reason=<free text> [user@time]: the text may hold spaces, the bracket is Slurm's
            reason = stripped[len("Reason=") :]
            if reason.endswith("]") and " [" in reason:
                reason = reason.rsplit(" [", 1)[0]
            reason = reason.strip()
    if state is None:
        raise ValueError("no State= in scontrol's answer")
    return state, reason


def from_slurm(run_command, scontrol, node_name):
    """The failed check when Slurm shows ``node_name`` drained (DRAIN or DRAINED, any base state) for
    a reason naming gpufleet, else None; a check naming the failure when scontrol cannot answer."""
    rc, out, err = run_command([scontrol, "show", "node", node_name], environ_update={"LC_ALL": "C"})
    if rc != 0:
        return _left(
            "unknown",
            "scontrol show node %s failed (rc %d): %s; whether gpufleet left it drained is unknown"
            % (node_name, rc, " ".join(err.split())[:300]),
        )
    try:
        state, reason = parse_slurm_node(out)
    except ValueError as exc:
        return _left("unknown", "scontrol show node %s: %s" % (node_name, exc))
    if "DRAIN" not in state.upper() or OUR_REASON not in (reason or "").lower():
        return None
    return _left(
        "slurm: %s" % reason,
        "Slurm shows %s %s for '%s' (gpufleet's reason) and the node has no drain record: a run drained it "
        "and stopped before returning it; see its report, then gpufleet drift --fix or the gate returns it"
        % (node_name, state, reason),
    )
