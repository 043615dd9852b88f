"""The standard targets a simulated node's /usr/lib/systemd/system holds, as systemd's own package
ships them (systemd.special(7)), reduced to their ordering and dependency lines.

`systemd-analyze verify` loads a service's default dependencies (sysinit.target, basic.target,
shutdown.target) and fails when they are missing, so without these a node could not verify the
units gpufleet writes. The fake systemctl starts units from the node's state, never these files;
they are here for the tools that read unit directories the way systemd does.
"""

from __future__ import annotations

from pathlib import Path

# name -> the [Unit] lines after Description (the dependencies systemd 252's own files declare)
_TARGETS: dict[str, tuple[str, list[str]]] = {
    "local-fs.target": ("Local File Systems", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "swap.target": ("Swaps", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "sysinit.target": (
        "System Initialization",
        ["Wants=local-fs.target swap.target", "After=local-fs.target swap.target"],
    ),
    "sockets.target": ("Sockets", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "timers.target": ("Timer Units", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "paths.target": ("Path Units", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "slices.target": ("Slice Units", ["DefaultDependencies=no", "Conflicts=shutdown.target"]),
    "basic.target": (
        "Basic System",
        [
            "Requires=sysinit.target",
            "Wants=sockets.target timers.target paths.target slices.target",
            "After=sysinit.target sockets.target paths.target slices.target",
        ],
    ),
    "shutdown.target": ("System Shutdown", ["DefaultDependencies=no", "RefuseManualStart=yes"]),
    "network-pre.target": ("Preparation for Network", ["RefuseManualStart=yes"]),
    "network.target": ("Network", ["After=network-pre.target", "RefuseManualStart=yes"]),
    "network-online.target": ("Network is Online", ["After=network.target"]),
    "multi-user.target": (
        "Multi-User System",
        ["Requires=basic.target", "After=basic.target", "AllowIsolate=yes"],
    ),
}

NAMES = tuple(sorted(_TARGETS))


def text(name: str) -> str:
    description, lines = _TARGETS[name]
    return "\n".join(
        ["[Unit]", f"Description={description}", "Documentation=man:systemd.special(7)", *lines, ""]
    )


def write(directory: Path) -> None:
    """Writes every standard target into ``directory`` (a node's /usr/lib/systemd/system)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in NAMES:
        (directory / name).write_text(text(name), encoding="utf-8")
