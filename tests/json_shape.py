"""The shape of a JSON document as a set of key paths, values left out: what a simulated tool's
output must share with the real tool's (``lldp.interface.chassis.mgmt-iface``; a list adds no step,
so one neighbour or eight give the same paths).

Not a test file: tests/unit/sim/test_fake_lldpctl.py compares the fake lldpctl with a real capture,
tests/conformance/test_lldpd_real.py with the real lldpd running.
"""

from __future__ import annotations

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
