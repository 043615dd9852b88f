"""Which function produces each check name: read from the code (an AST over plugins/module_utils,
plugins/modules and src/gpufleet), never from a run.

A check is built by ``results.check(name, ...)`` (``checks.check`` on the controller). A function
whose own parameter becomes that name (``_at_most(name, ...)``, ``roce_reading.Window(name=...)``)
only builds checks for its callers: it is a *builder*, and the producer of a name is the function
that writes the name as a literal (``"fabric.retransmits[%s]" % device``) into a check or a
builder, or the builder whose parameter's default is that literal. A check's name is
``<area>.<reading>[<device>]``; the name here is the part before ``[``.

A name the scan cannot read as a literal (built from a variable, ``"fabric.%s" % key``) is itself a
finding: every check name is written out where it is judged, so it can be found by searching.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS_MODULE = "plugins.module_utils.core.results"


def scanned_files() -> list[Path]:
    return sorted(
        [
            *(REPO / "plugins" / "module_utils").rglob("*.py"),
            *(REPO / "plugins" / "modules").glob("*.py"),
            *(REPO / "src" / "gpufleet").glob("*.py"),
        ]
    )


@dataclass(frozen=True)
class Param:
    """A name that is the enclosing function's parameter (or ``self.<attr>``, the class's)."""

    name: str
    attribute: bool = False
    # what the builder writes after the parameter ("%s[%s]" % (name, device): "[%s]")
    suffix: str = ""


@dataclass
class Function:
    path: Path
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: str | None
    constants: dict[str, ast.expr]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.qualname}"

    def params(self) -> list[str]:
        args = self.node.args
        names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        return names[1:] if self.cls and names[:1] == ["self"] else names

    def defaults(self) -> dict[str, ast.expr]:
        args = self.node.args
        positional = [*args.posonlyargs, *args.args]
        found = {
            a.arg: d
            for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
        }
        found.update(
            {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None}
        )
        return found

    def assigned(self, name: str) -> list[ast.expr]:
        """Every value the function assigns to the local ``name``."""
        values = []
        for node in ast.walk(self.node):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == name:
                        values.append(node.value)
                    elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        for t, v in zip(target.elts, node.value.elts, strict=False):
                            if isinstance(t, ast.Name) and t.id == name:
                                values.append(v)
        return values


@dataclass
class Scan:
    functions: dict[str, list[Function]] = field(default_factory=dict)
    # per file, the names that are results.check there
    check_aliases: dict[Path, set[str]] = field(default_factory=dict)
    # builder name -> (its parameter that becomes the name, the Function that defines it, the suffix)
    builders: dict[str, tuple[str, Function, str]] = field(default_factory=dict)
    # name -> producer ("path:qualname") -> lines
    producers: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


def _functions(path: Path, tree: ast.Module) -> Iterator[Function]:
    constants = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def walk(body: list[ast.stmt], prefix: str, cls: str | None) -> Iterator[Function]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield Function(path, prefix + node.name, node, cls, constants)
                yield from walk(node.body, f"{prefix}{node.name}.", None)
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.", node.name)

    yield from walk(tree.body, "", None)


def _aliases(path: Path, tree: ast.Module) -> set[str]:
    """The names results.check goes by in a file (``check``, ``_check``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(RESULTS_MODULE):
            names |= {a.asname or a.name for a in node.names if a.name == "check"}
    if path == REPO / "src" / "gpufleet" / "checks.py":
        names.add("check")  # check = cast(..., _vocabulary.check): the same function, loaded by path
    return names


def function_constants(function: Function | None) -> list[ast.expr]:
    return list(function.constants.values()) if function is not None else []


def _base(text: str) -> str | None:
    """``health.xid[%s]`` -> ``health.xid[]``, ``health.gpu_count`` as it is: a name with a device and
    one without are two checks (``health.dcgm_diag`` is the diagnostic that could not run,
    ``health.dcgm_diag[<test>]`` one of its tests)."""
    base, bracket, _device = text.partition("[")
    if "%" in base or "{" in base or "." not in base:
        return None
    return base + ("[]" if bracket else "")


def _called(call: ast.Call) -> tuple[str, str | None]:
    """(the callee's simple name, the name it is an attribute of)."""
    if isinstance(call.func, ast.Name):
        return call.func.id, None
    if isinstance(call.func, ast.Attribute):
        owner = call.func.value.id if isinstance(call.func.value, ast.Name) else None
        return call.func.attr, owner
    return "", None


class Scanner:
    def __init__(self) -> None:
        self.scan = Scan()
        self.trees: dict[Path, ast.Module] = {}
        for path in scanned_files():
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            self.trees[path] = tree
            self.scan.check_aliases[path] = _aliases(path, tree)
            for function in _functions(path, tree):
                self.scan.functions.setdefault(function.node.name, []).append(function)
        self.enclosing: dict[int, Function] = {}
        self._innermost()

    def _innermost(self) -> None:
        every = [f for fs in self.scan.functions.values() for f in fs]
        for function in sorted(every, key=lambda f: f.qualname.count(".")):
            for node in ast.walk(function.node):
                self.enclosing[id(node)] = function

    # ------------------------------------------------------------ resolving a name expression

    def values(self, name: str, function: Function | None) -> list[ast.expr] | None:
        """What the Name ``name`` can hold in ``function``: its local assignments, the items of a
        literal table a ``for`` loop unpacks it from, or a module-level constant."""
        if function is not None:
            assigned = function.assigned(name)
            if assigned:
                return assigned
            for node in ast.walk(function.node):
                if isinstance(node, (ast.For, ast.comprehension)):
                    found = self._loop_values(node.target, node.iter, name, function)
                    if found is not None:
                        return found
            if name in function.params():
                return None
            constants = function.constants
        else:
            constants = {}
        return [constants[name]] if name in constants else None

    def _loop_values(
        self, target: ast.expr, iterable: ast.expr, name: str, function: Function
    ) -> list[ast.expr] | None:
        if isinstance(target, ast.Name):
            position = None if target.id == name else -1
        elif isinstance(target, ast.Tuple):
            names = [t.id if isinstance(t, ast.Name) else None for t in target.elts]
            position = names.index(name) if name in names else -1
        else:
            return None
        if position == -1:
            return None
        table = iterable
        if isinstance(table, ast.Name) and table.id in function.constants:
            table = function.constants[table.id]
        if not isinstance(table, (ast.Tuple, ast.List)):
            return None
        if position is None:
            return list(table.elts)
        rows = [row for row in table.elts if isinstance(row, (ast.Tuple, ast.List))]
        return [row.elts[position] for row in rows] if len(rows) == len(table.elts) else None

    def raw(self, expr: ast.expr, function: Function | None, depth: int = 0) -> set[str | Param] | None:
        """The literal texts ``expr`` can be (Param for a parameter); None when unreadable."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
            return self._formatted(expr, function, depth)
        if isinstance(expr, ast.JoinedStr):
            head = expr.values[0] if expr.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and "[" in head.value:
                return {head.value + "{}]"}
            return None
        if isinstance(expr, ast.IfExp):
            body, orelse = (
                self.raw(expr.body, function, depth + 1),
                self.raw(expr.orelse, function, depth + 1),
            )
            return None if body is None or orelse is None else body | orelse
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return {Param(expr.attr, attribute=True)}
        if isinstance(expr, ast.Name):
            values = self.values(expr.id, function)
            if values is None:
                return {Param(expr.id)} if function is not None and expr.id in function.params() else None
            found: set[str | Param] = set()
            for value in values:
                one = self.raw(
                    value, function if value not in function_constants(function) else None, depth + 1
                )
                if one is None:
                    return None
                found |= one
            return found
        if isinstance(expr, ast.Call):
            name, _owner = _called(expr)
            found = set()
            for callee in self.scan.functions.get(name, []):
                returns = [n.value for n in ast.walk(callee.node) if isinstance(n, ast.Return) and n.value]
                for value in returns:
                    one = self.raw(value, callee, depth + 1)
                    if one is None or any(isinstance(x, Param) for x in one):
                        return None
                    found |= one
            return found or None
        return None

    def _formatted(self, expr: ast.BinOp, function: Function | None, depth: int) -> set[str | Param] | None:
        """``"<area>.%s[%s]" % (reading, device)``: the conversions before ``[`` filled in."""
        formats = self.raw(expr.left, function, depth + 1)
        if formats is None or any(isinstance(f, Param) for f in formats):
            return None
        arguments = expr.right.elts if isinstance(expr.right, ast.Tuple) else [expr.right]
        found: set[str | Param] = set()
        for text in map(str, formats):
            head, bracket, tail = text.partition("[")
            pieces = re.split(r"(%[sd])", head)
            if len(pieces) == 1:
                found.add(text)
                continue
            if pieces == ["", "%s", ""]:  # "%s[%s]" % (name, device): the name is the argument's
                one = self.raw(arguments[0], function, depth + 1)
                if one is None:
                    return None
                found |= {
                    Param(x.name, x.attribute, bracket + tail + x.suffix)
                    if isinstance(x, Param)
                    else x + bracket + tail
                    for x in one
                }
                continue
            options = [""]
            for index, piece in enumerate(pieces):
                if index % 2 == 0:
                    options = [o + piece for o in options]
                    continue
                one = self.raw(arguments[index // 2], function, depth + 1)
                if one is None or any(isinstance(x, Param) for x in one):
                    return None
                options = [o + str(x) for o in options for x in one]
            found |= {o + bracket + tail for o in options}
        return found

    def resolve(self, expr: ast.expr, function: Function | None, suffix: str = "") -> set[str | Param] | None:
        """The check names ``expr`` can be once a builder wrote ``suffix`` after it (_base), Param for
        a parameter; None when unreadable."""
        texts = self.raw(expr, function)
        if texts is None:
            return None
        found: set[str | Param] = set()
        for text in texts:
            if isinstance(text, Param):
                found.add(Param(text.name, text.attribute, text.suffix + suffix))
                continue
            base = _base(text + suffix)
            if base is None:
                return None
            found.add(base)
        return found

    # ------------------------------------------------------------ the calls that build checks

    def _name_argument(self, call: ast.Call, param: str, index: int) -> ast.expr | None:
        for keyword in call.keywords:
            if keyword.arg == param:
                return keyword.value
        return call.args[index] if index < len(call.args) else None

    def _builder_of(
        self, call: ast.Call, path: Path, function: Function | None
    ) -> tuple[str, int, str] | None:
        """(the parameter that becomes the check's name, its position) when ``call`` builds a check."""
        name, owner = _called(call)
        if (owner is None and name in self.scan.check_aliases[path]) or (
            name == "check" and owner in ("results", "checks")
        ):
            return "name", 0, ""
        if name in self.scan.builders:
            param, builder, suffix = self.scan.builders[name]
            return param, builder.params().index(param), suffix
        if owner is None and isinstance(call.func, ast.Name):
            # judge = _max_check if kind == "max" else _min_check; _max_check = partial(_limit_check, "max")
            return self._callee(call.func, function, 0)
        return None

    def _callee(self, expr: ast.expr, function: Function | None, depth: int) -> tuple[str, int, str] | None:
        if depth > 6:
            return None
        if isinstance(expr, ast.Name):
            if expr.id in self.scan.builders:
                param, builder, suffix = self.scan.builders[expr.id]
                return param, builder.params().index(param), suffix
            values = self.values(expr.id, function)
            found = {self._callee(v, function, depth + 1) for v in values or ()} - {None}
            return found.pop() if len(found) == 1 else None
        if isinstance(expr, ast.IfExp):
            found = {self._callee(v, function, depth + 1) for v in (expr.body, expr.orelse)} - {None}
            return found.pop() if len(found) == 1 else None
        if isinstance(expr, ast.Call) and _called(expr)[0] == "partial" and expr.args:
            inner = self._callee(expr.args[0], function, depth + 1)
            if inner is not None and inner[1] >= len(expr.args) - 1:
                return inner[0], inner[1] - (len(expr.args) - 1), inner[2]
        return None

    def _add_builder(self, function: Function, found: Param) -> bool:
        if found.attribute:
            init = next(
                (
                    f
                    for f in self.scan.functions.get("__init__", [])
                    if f.cls == function.cls and f.path == function.path
                ),
                None,
            )
            if init is None or found.name not in init.params():
                return False
            key, builder = function.cls, init
        else:
            key, builder = function.node.name, function
        assert key is not None
        if key in self.scan.builders:
            return False
        self.scan.builders[key] = (found.name, builder, found.suffix)
        return True

    def run(self) -> Scan:
        grew = True
        while grew:
            grew = False
            self.scan.producers, self.scan.unreadable = {}, []
            self.omitted: set[str] = set()
            for path, tree in self.trees.items():
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call):
                        grew |= self._call(node, path)
            # a parameter's default names the check only where a call leaves the parameter out
            for key, (param, builder, suffix) in self.scan.builders.items():
                default = builder.defaults().get(param)
                if default is not None and key in self.omitted:
                    where = builder.where.removesuffix(".__init__")
                    for base in self.resolve(default, None, suffix) or ():
                        self._produced(str(base), where, default.lineno)
        return self.scan

    def _call(self, call: ast.Call, path: Path) -> bool:
        function = self.enclosing.get(id(call))
        builder = self._builder_of(call, path, function)
        if builder is None:
            return False
        param, index, suffix = builder
        argument = self._name_argument(call, param, index)
        where = f"{path.relative_to(REPO)}:{call.lineno}"
        if argument is None:
            self.omitted.add(_called(call)[0])  # its default is the name
            return False
        found = self.resolve(argument, function, suffix)
        if found is None or function is None:
            self.scan.unreadable.append(f"{where}: {ast.unparse(argument)}")
            return False
        grew = False
        for one in found:
            if isinstance(one, Param):
                grew |= self._add_builder(function, one)
            else:
                self._produced(one, function.where, call.lineno)
        return grew

    def _produced(self, name: str, where: str, line: int) -> None:
        self.scan.producers.setdefault(name, {}).setdefault(where, []).append(line)


@functools.cache
def scan() -> Scan:
    return Scanner().run()


if __name__ == "__main__":
    result = scan()
    for name, where in sorted(result.producers.items()):
        print(f"{name:45} {'  '.join(sorted(where))}{'   <== ' + str(len(where)) if len(where) > 1 else ''}")
    print("builders:", {k: (p, b.where, x) for k, (p, b, x) in result.builders.items()})
    print("unreadable:", *result.unreadable, sep="\n  ")
