"""The shape of a JSON document as a set of key paths, values left out: what a simulated tool's
output must share with the real tool's (``lldp.interface.chassis.mgmt-iface``; a list adds no step,
so one neighbour or eight give the same paths); and every place in a document, as the tuples of keys
and list indexes that reach it (``places``), and an edit that replaces the value at one (``setter``).

Not a test file: tests/unit/sim/test_fake_lldpctl.py compares the fake lldpctl with a real capture,
tests/conformance/test_lldpd_real.py with the real lldpd running; tests/unit/test_fact_shapes.py and
tests/unit/test_from_events.py walk facts and events with ``places``; test_from_events.py and
tests/unit/module_utils/fabric/test_lldp.py spoil events and neighbours with ``setter``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def key_paths(document: Any, prefix: str = "") -> set[str]:
    """Every ``a.b.c`` key path in ``document`` (objects' keys, through lists)."""
    if isinstance(document, list):
        return set().union(*(key_paths(item, prefix) for item in document))
    if not isinstance(document, dict):
        return set()
    paths: set[str] = set()
    for key, value in document.items():
        path = prefix + key
        paths |= {path} | key_paths(value, path + ".")
    return paths


def places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``value`` down to the first element of each list (the others are alike)."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from places(item, (*path, key))
    elif isinstance(value, list) and value:
        yield from places(value[0], (*path, 0))


def setter(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    """An edit of a document: the value at ``path`` (keys and list indexes from the top down)
    replaced by ``value``."""

    def edit(document: Any) -> None:
        where = document
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value

    return edit
