"""The shape of each gpufleet_* fact a report's renderers read (report.md, report.html, gpufleet.prom),
written once: the events read by `report --from-events` (event_shapes) and a report.json read back
(report.from_dict) are checked against it, so a fact of another shape is refused naming the field,
never a traceback half-way through writing the files.

Only the containers the renderers walk are checked (an object, a list, a list of objects, a key they
index by); the readings inside (a sample, a temperature) may be anything: the renderers draw a reading
that is not a number as a gap or print it as it is.
"""

from __future__ import annotations

from typing import Any

# A shape: an object ({field: shape}: each field, when present and not null, of that shape; other
# fields are free), a list ([shape]: every element of that shape), or one of the leaves below.
ANY = "anything"
LIST = "a list"  # a list whose elements are not walked (a trace's samples)
NUMBER = "a number"
NAME = "a string or a number"  # used as a key (hashed) and printed

_GPU = {"power": {"enforced_limit_w": NUMBER, "requested_limit_w": NUMBER}}
_CONNECTOR = {"key": NAME, "id": NAME}
_TRACE = {
    "t": LIST,
    "gpu_c": LIST,
    "memory_c": LIST,
    "sm_mhz": LIST,
    "power_w": LIST,
    "events": [{}],
}
# The renderers' facts: html_report (gpus' power panel, coolant rows, burn-in charts and summary),
# markdown_report (the GPU count), prom (gpus, watch).
SHAPES: dict[str, Any] = {
    "gpufleet_gpus": [_GPU],
    "gpufleet_coolant": {"connectors": [_CONNECTOR], "cdus": [{"connectors": [_CONNECTOR]}]},
    "gpufleet_burn_in": {"gpus": [_TRACE], "limits": {}},
    # prom reads a watch that acts' left-alone node from its remediation history's events
    "gpufleet_watch": {"history": [{}]},
}


_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def _kind(value: Any) -> str:
    return "null" if value is None else _KINDS.get(type(value), f"a {type(value).__name__}")


def _leaf_problem(value: Any, shape: str) -> str | None:
    if shape == ANY:
        return None
    if shape == LIST:
        ok = isinstance(value, list)
    elif shape == NUMBER:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    return None if ok else f"{_kind(value)}, not {shape}"


def _problem(value: Any, shape: Any, where: str) -> str | None:
    """'<where>: <what>' of the first part of value not of shape, None when it fits."""
    if isinstance(shape, str):
        found = _leaf_problem(value, shape)
        return f"{where}: {found}" if found else None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where}: {_kind(value)}, not a list"
        for i, item in enumerate(value):
            found = _problem(item, shape[0], f"{where}[{i}]")
            if found:
                return found
        return None
    if not isinstance(value, dict):
        return f"{where}: {_kind(value)}, not an object"
    for field, inner in shape.items():
        if value.get(field) is not None:
            found = _problem(value[field], inner, f"{where}.{field}")
            if found:
                return found
    return None


def problem(name: str, value: Any, where: str) -> str | None:
    """What in the fact ``name`` does not have the shape the renderers read ('<where>...: <what>');
    None when it fits or gpufleet renders no such fact. ``where`` names the fact (its path)."""
    shape = SHAPES.get(name)
    if shape is None or value is None:
        return None
    return _problem(value, shape, where)


def facts_problem(facts: dict[str, Any], where: str) -> str | None:
    """problem() of every fact in ``facts`` (a host's), ``where`` the facts' own path."""
    for name, value in facts.items():
        found = problem(name, value, f"{where}.{name}")
        if found:
            return found
    return None
