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
# The first word of every reason gpufleet gives a drain ("gpufleet drift --fix", "gpufleet gate
# (post-maintenance)", "gpufleet gate: health.xid[0000:1b:00.0] 79"): a drain for any other reason is a
# person's, and gpufleet never returns that node (is_ours).
OUR_REASON = "gpufleet"
# The longest reason gpufleet writes. slurmctld and scontrol set no limit, but slurmdbd keeps a node's
# reason in event_table.reason, a MySQL tinytext (255 bytes; src/plugins/accounting_storage/mysql/
# accounting_storage_mysql.c), and sinfo -R prints it in one column (20 wide by default, widened with
# sinfo -R -o '%128E ...'): 128 printable ASCII characters (bytes) fit both, one check or two and "+N more".
MAX_REASON = 128


def is_ours(reason):
    """Whether a drain ``reason`` is one gpufleet wrote: its first word is gpufleet (any case, a colon
    after it allowed). A reason that names gpufleet later ("RMA 1234: gpufleet gate: health.xid[..] 79",
    a person's drain quoting gpufleet's) is not: that node is the person's to return."""
    words = (reason or "").split(None, 1)
    return bool(words) and words[0].lower().rstrip(":") == OUR_REASON


def _plain(text):
    """One line of printable ASCII: whitespace (newlines too) folded to one space, '"' as "'" (scontrol
    drops a '"' at either end of a reason), " [" as " (" (scontrol show node ends a reason with
    " [user@time]", read back as the last " ["), any other character as '?'."""
    text = " ".join(str(text).split()).replace('"', "'").replace(" [", " (")
    return "".join(c if " " <= c <= "~" else "?" for c in text)


def _cut(text, length):
    """``text`` in at most ``length`` characters, "..." ending it where it was cut."""
    return text if len(text) <= length else text[: max(length - 3, 0)].rstrip() + "..."


def _value(found):
    """A failed check's value (and unit) as the reason shows it: numbers plainly (79, 91.5 C), a list
    joined with commas, a reading that is missing as "not read"; at most 40 characters."""
    value, unit = found.get("value"), found.get("unit") or ""
    if value is None:
        return "not read"
    if isinstance(value, float):
        text = "%g" % value
    elif isinstance(value, (list, tuple)):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = ",".join("%s=%s" % (k, v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    else:
        text = str(value)
    if unit and not isinstance(value, (str, bool)):
        text = "%s %s" % (text, unit)
    return _cut(_plain(text), 40)


def drain_reason(what, checks, fallback="", length=MAX_REASON):
    """The drain reason that names why gpufleet keeps a node out of service: ``gpufleet <what>: `` and
    its first failed checks, each name and value (``gpufleet gate: health.xid[0000:1b:00.0] 79;
    thermal.gpu_temp_c[GPU-...] 91 C +2 more``), in at most ``length`` characters of printable ASCII
    on one line. A check failed twice (at idle and under load) is named once; checks that do not fit are
    counted ("+N more"), and a first check too long alone is cut ("..."). Without a failed check the
    reason is ``fallback`` (the failed task and its message), cut to fit. Always one gpufleet
    recognises as its own (is_ours). Pure: the gate's drain and a watch's quarantine both use it."""
    head = "%s %s" % (OUR_REASON, _plain(what) or "run")
    items, named = [], set()
    for found in checks or []:
        if not isinstance(found, dict) or found.get("ok", True) or found.get("name") in named:
            continue
        named.add(found.get("name"))
        items.append(_plain("%s %s" % (found.get("name") or "?", _value(found))))
    if not items:
        return _cut("%s: %s" % (head, _plain(fallback) or "blocked"), length)
    text, shown = "%s: %s" % (head, items[0]), 1
    for item in items[1:]:
        left = len(items) - shown - 1
        longer = "%s; %s" % (text, item)
        if len(longer) + (len(" +%d more" % left) if left else 0) > length:
            break
        text, shown = longer, shown + 1
    more = " +%d more" % (len(items) - shown) if len(items) > shown else ""
    return _cut(text, length - len(more)) + more


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
    gpufleet's reason (is_ours), else None; a check naming the failure when scontrol cannot answer."""
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
    if "DRAIN" not in state.upper() or not is_ours(reason):
        return None
    return _left(
        "slurm: %s" % reason,
        "Slurm shows %s %s for '%s' (gpufleet's reason) and the node has no drain record: a run drained it "
        "and stopped before returning it; see its report, then gpufleet drift --fix or the gate returns it"
        % (node_name, state, reason),
    )
