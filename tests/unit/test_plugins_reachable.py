"""Every file under plugins/ serves a plugin Ansible runs: a module_utils or plugin_utils file is
imported, directly or through others, by a module, an action or a callback plugin, and every doc
fragment is extended by a module. A file only tests reach is dead code in what the collection ships."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_import_graph import graph

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
PACKAGE = "ansible_collections.gpufleet.node.plugins"
ROOTS = ("modules", "action", "callback")
# Reached only from tests, kept for a reason the code cannot show: none. (sonic_qos was, until SONiC leaves
# were read in production: the switch_qos action plugin reads them through fabric/sonic_leaf.py.)
ONLY_TESTS_REACH: set[str] = set()


def _below(name: str) -> list[str]:
    """A plugins module's path below plugins/ (["module_utils", "core", "results"])."""
    return name.split(".")[len(PACKAGE.split(".")) :]


def reachable() -> tuple[set[str], dict[str, set[str]]]:
    edges = graph(PLUGINS, PACKAGE)
    seen = {name for name in edges if _below(name)[:1] and _below(name)[0] in ROOTS}
    stack = list(seen)
    while stack:
        for target in edges.get(stack.pop(), set()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen, edges


def test_the_walk_reaches_the_shared_code() -> None:
    seen, _ = reachable()
    assert f"{PACKAGE}.module_utils.core.results" in seen
    assert f"{PACKAGE}.plugin_utils.controller_action" in seen


def test_every_library_file_is_imported_by_a_plugin() -> None:
    seen, edges = reachable()
    libraries = {
        name
        for name in edges
        if _below(name)[:1] in (["module_utils"], ["plugin_utils"])
        and not (PLUGINS / Path(*_below(name)) / "__init__.py").is_file()
    }
    assert len(libraries) > 40  # the walk found the library files
    assert sorted(libraries - seen - ONLY_TESTS_REACH) == []
    assert libraries - seen >= ONLY_TESTS_REACH  # an exception that became reachable is dropped


def test_every_doc_fragment_is_extended_by_a_module() -> None:
    fragments = {p.stem for p in (PLUGINS / "doc_fragments").glob("*.py") if p.stem != "__init__"}
    extended = set()
    for module in (PLUGINS / "modules").glob("*.py"):
        extended |= set(re.findall(r"gpufleet\.node\.(\w+)(?:\.\w+)?", module.read_text(encoding="utf-8")))
    assert len(fragments) >= 5
    assert sorted(fragments - extended) == []
