"""Unit files as a simulated node's systemd sees them: parsing, lookup and boot order."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

# Inside a node, /etc is its own overlay and /usr/lib/systemd/system its own bind mount.
UNIT_DIRS = (Path("/etc/systemd/system"), Path("/run/systemd/system"), Path("/usr/lib/systemd/system"))


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def find(name: str, dirs: tuple[Path, ...] = UNIT_DIRS) -> Path | None:
    for directory in dirs:
        path = directory / unit_name(name)
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
