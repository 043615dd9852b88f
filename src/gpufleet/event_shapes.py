"""Whether a job event read from a file has the shape ansible-runner and AWX give it, as far as
gpufleet reads it (events.Collector, the commands' host judges, the report). `report --from-events`
reads files anyone could have written: one of another shape is refused naming the file and the
field, never read as data or left to fail deep in a judge."""

from __future__ import annotations

from typing import Any

from gpufleet import events

# How deep an event may nest: ansible-runner's deepest are a loop's item diffs, about 10 levels.
MAX_DEPTH = 64

# The event_data fields read as text (task names, the play, the playbook, the host).
_TEXT_FIELDS = ("playbook", "host", "task", "task_action", "resolved_action", "role", "resolved_role", "play")
# playbook_on_stats' per-host counts.
_STATS_COUNTS = ("ok", "failures", "dark", "skipped", "changed", "processed", "ignored", "rescued")
# The module result contract (plugins/module_utils/core/results.py): a check's and a change's fields.
_CHECK_FIELDS = ("name", "ok", "value", "limit", "unit", "message")
_CHANGE_FIELDS = ("setting", "from", "to")


def depth(value: Any) -> int:
    """How deeply lists and objects nest in a JSON value (iterative: any depth is measured)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def problem(event: Any) -> str | None:
    """What in one event does not have its ansible-runner/AWX shape ('<field>: <what>'); None when
    gpufleet can read it."""
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return "not an ansible-runner or AWX job event (no 'event' name)"
    if depth(event) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    counter = event.get("counter")
    if counter is not None and (type(counter) is not int):
        return f"counter: {counter!r} is not an integer"
    if event.get("created") is not None and not isinstance(event["created"], str):
        return "created: not a time (a string)"
    data = event.get("event_data")
    if data is None:
        return None
    if not isinstance(data, dict):
        return f"event_data: a {type(data).__name__}, not an object"
    for key in _TEXT_FIELDS:
        if data.get(key) is not None and not isinstance(data[key], str):
            return f"event_data.{key}: a {type(data[key]).__name__}, not a string"
    if event["event"] == events.STATS_EVENT:
        return _stats_problem(data)
    if event["event"] in events.OUTCOMES:
        return _result_problem(data.get("res"), "event_data.res")
    return None


def _stats_problem(data: dict[str, Any]) -> str | None:
    for key in _STATS_COUNTS:
        counts = data.get(key)
        if counts is None:
            continue
        if not isinstance(counts, dict) or not all(type(n) is int for n in counts.values()):
            return f"event_data.{key}: not a count per host ({{host: integer}})"
    if not isinstance(data.get("artifact_data") or {}, dict):
        return "event_data.artifact_data: not an object"
    return None


def _result_problem(res: Any, where: str) -> str | None:
    """A task's result (``res``) and its loop items, as events.task_entry and the judges read them."""
    if res is None:
        return None
    if not isinstance(res, dict):
        return f"{where}: a {type(res).__name__}, not an object"
    items = res.get("results")
    if items is not None and not isinstance(items, list):
        return f"{where}.results: not a list"
    for i, item in enumerate(items or []):
        found = _result_problem(item, f"{where}.results[{i}]") if isinstance(item, dict) else None
        if found:
            return found
    for key, fields, name in (("checks", _CHECK_FIELDS, "check"), ("changes", _CHANGE_FIELDS, "change")):
        entries = res.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"{where}.{key}: a {type(entries).__name__}, not a list"
        for i, entry in enumerate(entries):
            missing = [f for f in fields if not isinstance(entry, dict) or f not in entry]
            if missing:
                return f"{where}.{key}[{i}]: not a {name} (no {', '.join(missing)})"
            if not isinstance(entry[fields[0]], str):
                return f"{where}.{key}[{i}].{fields[0]}: not a string"
            if name == "check" and not isinstance(entry["ok"], bool):
                return f"{where}.{key}[{i}].ok: not a boolean"
    hints = res.get("hints")
    if hints is not None and not (isinstance(hints, list) and all(isinstance(h, str) for h in hints)):
        return f"{where}.hints: not a list of strings"
    for key in ("ansible_facts", "override"):
        if res.get(key) is not None and not isinstance(res[key], dict):
            return f"{where}.{key}: a {type(res[key]).__name__}, not an object"
    return None
