"""The preflight's `ansible-inventory --list` kept from one run to the next, for a static inventory only.

Every command lists the inventory before its first play (preflight.read_inventory): a second Python
process that imports ansible-core and parses the inventory, ~0.4-0.6 CPU-s of each run (bench/README.md,
issue 40). For the same inputs its listing is the same, so it is kept in gpufleet's state directory,
under a key of every input that can change it:

- the content (SHA-256), size and path of every file of the inventory (a directory inventory: every file
  under it) and of its ``group_vars`` and ``host_vars`` trees (beside the path as given and beside the
  file a link names), and which of those exist;
- the ansible.cfg the tool runs with (its content), ansible-core (its release file and the
  ansible-inventory that runs), the Python gpufleet runs on;
- the environment ansible-inventory reads (every ``ANSIBLE_*`` and ``PYTHON*`` variable but the settings
  of the ssh and paramiko connections, which it never loads; PATH, HOME) and the working directory;
- --limit.

A listing that is not certain to follow from those is never kept: an inventory script (an executable
file), an inventory plugin's configuration (a file with a top-level ``plugin:`` key), a directory holding
either, a --limit read from a file (``@file``), a playbook directory or vars or inventory plugins set in
the configuration or the environment (they read files the key does not name). A listing is kept only when
the key computed after ansible-inventory ran is the one computed before (nothing changed while it read).
GPUFLEET_INVENTORY_CACHE=0 turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from gpufleet import atomic_file, runlock

# The format of a kept listing; another is read as no listing.
VERSION = 1
# The listings kept (the newest by use); a listing is a few hundred kB for a fleet of 1,000 nodes.
MAX_KEPT = 16
# A top-level `plugin:` key: the file configures an inventory plugin (constructed, a cloud's), whose
# listing depends on more than the file.
PLUGIN_KEY = re.compile(rb"^plugin\s*:", re.MULTILINE)
# Settings that make ansible-inventory read files the key does not name.
UNKEYED_SETTINGS = re.compile(r"^\s*(playbook_dir|vars_plugins\w*|enable_plugins)\s*=", re.MULTILINE)
UNKEYED_ENV = (
    "ANSIBLE_PLAYBOOK_DIR",
    "ANSIBLE_VARS_PLUGINS",
    "ANSIBLE_VARS_ENABLED",
    "ANSIBLE_INVENTORY_ENABLED",
)
KEYED_ENV = ("PATH", "HOME")
# The settings of the connection plugins, which ansible-inventory never loads (ansible's ssh ControlPath
# directory differs from one run to the next where a caller gives each run its own).
CONNECTION_ENV = ("ANSIBLE_SSH_", "ANSIBLE_PARAMIKO_")


def enabled() -> bool:
    return os.environ.get("GPUFLEET_INVENTORY_CACHE", "1") != "0"


def directory() -> Path:
    return runlock.state_dir() / "inventory-listings"


def _files(root: Path) -> list[Path]:
    """The files under a directory (links followed, as ansible follows them), in a stable order."""
    found: list[Path] = []
    for top, dirs, names in os.walk(root, followlinks=True):
        dirs.sort()
        found.extend(Path(top) / name for name in sorted(names))
    return found


def _digest(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"path": str(path), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _tree(root: Path) -> list[dict[str, Any]] | str:
    """Each file of a group_vars or host_vars tree (a file of that name is itself read), or 'absent'."""
    if root.is_dir():
        return [_digest(p) for p in _files(root)]
    if root.exists():
        return [_digest(root)]
    return "absent"


def _static(path: Path, data: bytes) -> bool:
    """Neither a script ansible would run nor an inventory plugin's configuration."""
    return not os.access(path, os.X_OK) and PLUGIN_KEY.search(data) is None


def ansible_release() -> Path | None:
    """ansible-core's release file (its version), found without importing ansible."""
    spec = importlib.util.find_spec("ansible")
    return Path(spec.origin).parent / "release.py" if spec is not None and spec.origin else None


def key(inventory: Path, limit: str | None, env: dict[str, str]) -> dict[str, Any] | None:
    """Every input of `ansible-inventory -i INVENTORY --list [--limit LIMIT]` under ``env``; None when
    the inventory is not a static one or the listing may depend on something else (the module
    docstring says which)."""
    if not enabled() or (limit and "@" in limit) or any(env.get(name) for name in UNKEYED_ENV):
        return None
    try:
        config = Path(env["ANSIBLE_CONFIG"]).read_bytes() if env.get("ANSIBLE_CONFIG") else None
        if config is None or UNKEYED_SETTINGS.search(config.decode("utf-8", "replace")):
            return None
        source = inventory.resolve()
        sources = _files(source) if source.is_dir() else [source]
        inputs = []
        for path in sources:
            data = path.read_bytes()
            if not _static(path, data):
                return None
            inputs.append({"path": str(path), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        # ansible reads group_vars and host_vars beside the path as given (a link's own directory, not its
        # target's): both are keyed
        given = Path(os.path.abspath(inventory))
        basedirs = sorted({str(p if p.is_dir() else p.parent) for p in (given, source)})
        tool = shutil.which("ansible-inventory", path=env.get("PATH"))
        release = ansible_release()
        if tool is None or release is None:
            return None
        return {
            "version": VERSION,
            "inventory": str(source),
            "sources": inputs,
            "vars": {
                base: {tree: _tree(Path(base) / tree) for tree in ("group_vars", "host_vars")}
                for base in basedirs
            },
            "config": {"path": env["ANSIBLE_CONFIG"], "sha256": hashlib.sha256(config).hexdigest()},
            "ansible": [_digest(release), _digest(Path(tool).resolve()), str(Path(tool).resolve())],
            "python": sys.version,
            "env": {
                name: value
                for name, value in sorted(env.items())
                if (name.startswith(("ANSIBLE_", "PYTHON")) or name in KEYED_ENV)
                and not name.startswith(CONNECTION_ENV)
            },
            "cwd": os.getcwd(),
            "limit": limit,
        }
    except (OSError, ValueError):
        return None


def _name(found: dict[str, Any]) -> Path:
    text = json.dumps(found, sort_keys=True)
    return directory() / f"{hashlib.sha256(text.encode()).hexdigest()}.json"


def get(found: dict[str, Any]) -> dict[str, Any] | None:
    """The listing kept under this key, or None."""
    path = _name(found)
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != found or not isinstance(kept.get("listing"), dict):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # the newest by use is kept longest
    listing: dict[str, Any] = kept["listing"]
    return listing


def put(found: dict[str, Any], listing: dict[str, Any]) -> None:
    """Keeps the listing under this key (written whole, in a directory only its owner reads: a
    listing holds the inventory's variables); the oldest beyond MAX_KEPT go. A failure to keep it is
    no failure of the run."""
    where = directory()
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(where, 0o700)
        atomic_file.replace(_name(found), json.dumps({"key": found, "listing": listing}))
        kept = sorted(where.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[MAX_KEPT:]:
            old.unlink(missing_ok=True)
    except OSError:
        return
