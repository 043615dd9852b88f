"""Whether a job event read from a file has the shape ansible-runner and AWX give it, as far as
gpufleet reads it (events.Collector, the commands' host judges, the report). `report --from-events`
reads files anyone could have written: one of another shape is refused naming the file and the
field, never read as data or left to fail deep in a judge: the facts the report's renderers read too
(fact_shapes). A host name holding a lone surrogate is refused; elsewhere one is kept as its escape
(escaped), so every report file can be written as UTF-8."""

from __future__ import annotations

import re
from typing import Any

from gpufleet import events, fact_shapes, printable

# How deep an event may nest: ansible-runner's deepest are a loop's item diffs, about 10 levels.
MAX_DEPTH = 64

# The event_data fields read as text (task names, the play, the playbook, the host).
_TEXT_FIELDS = ("playbook", "host", "task", "task_action", "resolved_action", "role", "resolved_role", "play")
# playbook_on_stats' per-host counts.
_STATS_COUNTS = ("ok", "failures", "dark", "skipped", "changed", "processed", "ignored", "rescued")
# The module result contract (plugins/module_utils/core/results.py): a check's and a change's fields.
_CHECK_FIELDS = ("name", "ok", "value", "limit", "unit", "message")
_CHANGE_FIELDS = ("setting", "from", "to")
# A UTF-16 surrogate code point: JSON's "\\udc80" decodes to one when it is not half of a pair (a byte
# that was not UTF-8, as Python's surrogateescape reads it), and no text holding one can be written as
# UTF-8 (report.md, report.html).
_SURROGATE = re.compile("[\ud800-\udfff]")
# Such an escape in an event file's text: the only way one reaches a string read from UTF-8.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


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
    if isinstance(data.get("host"), str):
        wrong = _host_problem(data["host"])
        if wrong:
            return f"event_data.host: {wrong}"
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
        wrong = next(filter(None, map(_host_problem, counts)), None)
        if wrong:
            return f"event_data.{key}: {wrong}"
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
    # the facts the report's renderers read (report.html's coolant rows, burn-in charts, ...)
    return fact_shapes.facts_problem(res.get("ansible_facts") or {}, f"{where}.ansible_facts")


def _host_problem(name: str) -> str | None:
    """Why a host's name cannot be one (an inventory's names are text): a lone surrogate in it."""
    found = _SURROGATE.search(name)
    if found is None:
        return None
    return (
        f"host {name!a} is not a host name: it holds a lone surrogate (U+{ord(found.group()):04X}, "
        "what a byte that is not UTF-8 becomes), which no inventory names and no report can be written with"
    )


def escaped(value: Any) -> Any:
    """``value`` (an event that has its shape: problem() is None) with each lone surrogate in its
    strings, keys too, written as its escape (the text \\udcff): a message that quoted a node's
    non-UTF-8 output is reported as it came, and the report's files can be written as UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.sub(printable.escape, value)
    if isinstance(value, list):
        return [escaped(item) for item in value]
    if isinstance(value, dict):
        return {escaped(key): escaped(item) for key, item in value.items()}
    return value
