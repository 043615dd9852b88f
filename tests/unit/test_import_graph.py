"""No module of the gpufleet package imports one that imports it back, directly or through others
(imports inside functions count: a cycle hidden in a function is still a cycle); the collection's
module_utils domains import one way (core below every domain, node above them)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
MODULE_UTILS = REPO / "plugins" / "module_utils"
MODULE_UTILS_PACKAGE = "ansible_collections.gpufleet.node.plugins.module_utils"


def _modules(root: Path = SRC, package: str = "") -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join([*([package] if package else []), *parts])] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's own modules that ``name`` imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
    return (found & modules.keys()) - {name}


def graph(root: Path = SRC, package: str = "") -> dict[str, set[str]]:
    modules = _modules(root, package)
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def domain_graph() -> dict[str, set[str]]:
    """module_utils' domains (its sub-packages) and the other domains each one's modules import."""

    def domain(name: str) -> str:
        return name[len(MODULE_UTILS_PACKAGE) + 1 :].split(".")[0]

    edges: dict[str, set[str]] = {}
    for name, imported in graph(MODULE_UTILS, MODULE_UTILS_PACKAGE).items():
        if name != MODULE_UTILS_PACKAGE:
            edges.setdefault(domain(name), set()).update(domain(i) for i in imported)
    return {d: targets - {d, ""} for d, targets in edges.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each as the path that closes it (a depth-first search from each module)."""
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(node)

    for start in sorted(edges):
        if start not in done:
            visit(start, [start])
    return found


def test_the_graph_is_read() -> None:
    edges = graph()
    assert "gpufleet.report" in edges["gpufleet.report_files"]
    assert "gpufleet.report" in edges["gpufleet.prom"]


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert cycles(graph()) == []


def test_the_module_utils_graph_is_read() -> None:
    edges = graph(MODULE_UTILS, MODULE_UTILS_PACKAGE)
    files = sorted(MODULE_UTILS.rglob("*.py"))
    assert len(edges) == len(files) > 40  # every file, in every sub-package
    watch = f"{MODULE_UTILS_PACKAGE}.node.watch"
    assert f"{MODULE_UTILS_PACKAGE}.node.node_health" in edges[watch]  # from <domain> import <module>
    assert f"{MODULE_UTILS_PACKAGE}.core.results" in edges[watch]  # from <domain>.<module> import <name>


def test_module_utils_domains_import_one_way() -> None:
    """core imports no other domain, no domain imports node (drift and watch sit on top of them all),
    and no two domains import each other, even through others."""
    edges = domain_graph()
    assert {"core", "node", "gpu", "rdma", "fabric", "thermal", "vllm", "mgmt"} <= edges.keys()
    assert edges["core"] == set()
    assert edges["gpu"] == {"core"}  # node_health judges the whole node (it reads the NICs too): node's
    assert [d for d, targets in edges.items() if "node" in targets] == []
    assert cycles(edges) == []
    assert cycles(graph(MODULE_UTILS, MODULE_UTILS_PACKAGE)) == []
