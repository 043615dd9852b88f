"""Unit files as a simulated node's systemd sees them: parsing, lookup and boot order,
template instances and their specifiers, service environments and Condition*/Assert* checks."""

from __future__ import annotations

import glob
import os
import re
import shlex
from pathlib import Path
from typing import Any

Unit = dict[str, dict[str, list[str]]]

# Inside a node, /etc is its own overlay and /usr/lib/systemd/system its own bind mount.
UNIT_DIRS = (Path("/etc/systemd/system"), Path("/run/systemd/system"), Path("/usr/lib/systemd/system"))


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def template_of(name: str) -> str | None:
    """vllm@glm52.service -> vllm@.service; None when the name is no template instance."""
    prefix, at, rest = unit_name(name).partition("@")
    if not at or rest.startswith("."):
        return None
    return f"{prefix}@{rest[rest.rfind('.') :]}"


def find(name: str, dirs: tuple[Path, ...] = UNIT_DIRS) -> Path | None:
    """The unit's file; an instance with no file of its own uses its template's."""
    wanted = [unit_name(name)] + ([template] if (template := template_of(name)) else [])
    for candidate in wanted:
        for directory in dirs:
            path = directory / candidate
            if path.is_file():
                return path
    return None


def all_units(dirs: tuple[Path, ...] = UNIT_DIRS) -> dict[str, Path]:
    """Unit name -> the file that wins (earlier directories override later ones)."""
    found: dict[str, Path] = {}
    for directory in reversed(dirs):
        if directory.is_dir():
            for path in directory.iterdir():
                if path.is_file() and path.suffix in (".service", ".target", ".timer"):
                    found[path.name] = path
    return found


def parse(path: Path) -> dict[str, dict[str, list[str]]]:
    """[Section] Key=Value, keys may repeat (ExecStart=, After=)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def specifiers(name: str) -> dict[str, str]:
    """systemd.unit(5) specifiers a unit's settings may use (the ones services use in practice)."""
    full = unit_name(name)
    stem = full[: full.rfind(".")]
    prefix, _, instance = stem.partition("@")
    return {"n": full, "N": stem, "p": prefix, "i": instance, "I": instance.replace("-", "/"), "%": "%"}


def load(name: str, path: Path) -> Unit:
    """The unit as `name` sees it: parsed, with %i, %n, ... replaced."""
    spec = specifiers(name)
    unit = parse(path)

    def expand(text: str) -> str:
        return re.sub(r"%(.)", lambda m: spec.get(m.group(1), m.group(0)), text)

    return {sec: {key: [expand(v) for v in vals] for key, vals in keys.items()} for sec, keys in unit.items()}


def value(unit: dict[str, dict[str, list[str]]], section: str, key: str, default: str = "") -> str:
    values = unit.get(section, {}).get(key, [])
    return values[-1] if values else default


def words(unit: dict[str, dict[str, list[str]]], section: str, key: str) -> list[str]:
    return [w for v in unit.get(section, {}).get(key, []) for w in v.split()]


def exec_lines(unit: dict[str, dict[str, list[str]]], key: str) -> list[tuple[bool, list[str]]]:
    """(ignore_failure, argv) per Exec line; a leading '-' means failures are ignored."""
    lines = []
    for line in unit.get("Service", {}).get(key, []):
        ignore = line.startswith("-")
        argv = shlex.split(line.lstrip("-@+!"))
        if argv:
            lines.append((ignore, argv))
    return lines


def expand_argv(words: list[str], env: dict[str, str]) -> list[str]:
    """Exec line variables: "$VAR" alone becomes its words, "${VAR}" is replaced in place."""
    out: list[str] = []
    for word in words:
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            out.extend(env.get(whole.group(1), "").split())
            continue
        out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word))
    return out


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines as EnvironmentFile= reads them: comments and invalid lines skipped,
    matching quotes around a value removed."""
    env: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, eq, val = line.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            continue
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            val = val[1:-1]
        env[key] = val
    return env


# The manager's own environment for system services (systemd.exec(5), "Environment variables").
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def environment(unit: Unit) -> dict[str, str]:
    """Environment= then EnvironmentFile= (which wins, files in order); a missing file is an error
    unless its path has a leading '-'."""
    env = dict(BASE_ENV)
    for line in unit.get("Service", {}).get("Environment", []):
        for word in shlex.split(line):
            key, eq, val = word.partition("=")
            if eq:
                env[key] = val
    for line in unit.get("Service", {}).get("EnvironmentFile", []):
        optional = line.startswith("-")
        path = Path(line.lstrip("-").strip())
        try:
            env.update(parse_env_file(path.read_text(encoding="utf-8")))
        except OSError as exc:
            if not optional:
                raise FileNotFoundError(f"Failed to load environment files: {path}") from exc
    return env


_CHECKS = {
    "PathExists": lambda p: os.path.exists(p),
    "PathExistsGlob": lambda p: bool(glob.glob(p)),
    "PathIsDirectory": lambda p: os.path.isdir(p),
    "FileNotEmpty": lambda p: os.path.isfile(p) and os.path.getsize(p) > 0,
    "DirectoryNotEmpty": lambda p: os.path.isdir(p) and bool(os.listdir(p)),
    "FileIsExecutable": lambda p: os.path.isfile(p) and os.access(p, os.X_OK),
}


def _holds(unit: Unit, kind: str) -> bool:
    """All Condition*/Assert* path checks of a kind hold ('!' negates; unknown checks pass)."""
    for key, values in unit.get("Unit", {}).items():
        check = _CHECKS.get(key.removeprefix(kind)) if key.startswith(kind) else None
        for raw in values if check else []:
            text = raw.lstrip("|")
            negate = text.startswith("!")
            if check is not None and check(text.lstrip("!")) == negate:
                return False
    return True


def conditions_hold(unit: Unit) -> bool:
    """Condition*: when one fails the unit is skipped, and starting it is no error."""
    return _holds(unit, "Condition")


def asserts_hold(unit: Unit) -> bool:
    """Assert*: when one fails, starting the unit fails."""
    return _holds(unit, "Assert")


def boot_order(names: list[str], units: dict[str, Any]) -> list[str]:
    """Orders units by After=/Before= among themselves (stable, by name otherwise)."""
    after: dict[str, set[str]] = {n: set() for n in names}
    for name in names:
        unit = units[name]
        for other in words(unit, "Unit", "After"):
            if other in after:
                after[name].add(other)
        for other in words(unit, "Unit", "Before"):
            if other in after:
                after[other].add(name)
    ordered: list[str] = []
    pending = sorted(names)
    while pending:
        ready = [n for n in pending if after[n] <= set(ordered)] or pending[:1]  # a cycle: take one
        ordered.append(ready[0])
        pending.remove(ready[0])
    return ordered
