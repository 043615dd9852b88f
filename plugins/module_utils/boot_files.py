# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The boot files of the roles (the scripts, confs and units that re-apply settings at boot), as changes.

rdma_link, rdma_qos and gpu_power write files that re-apply their settings at every boot, and enable
the units that run them. A boot file edited by hand re-applies the wrong setting at the next boot, so
both `gpufleet drift` (node_facts) and provision's report name a boot file that is not what the role
writes, under the same setting names:

- ``<role>.boot_file[<path>]``: from ``None`` (no file) or ``sha256:<16 hex>`` of the node's file, to
  ``sha256:<16 hex>`` of what the role writes;
- ``<role>.boot_file_mode[<path>]``: from and to ``'0644'``-style modes, only when the content is
  right (a file whose content is wrong is rewritten with its mode: one change);
- ``<role>.boot_unit_enabled[<unit>]``: from ``False`` to ``True``, only when the unit file is right
  (in check mode the role cannot look up a unit file it has yet to write, so it leaves that to the
  next run; drift says what check mode says).

The comparison is pure (:func:`compare`); :func:`file_state` and :func:`unit_enabled` read the node
(node_facts' module), :func:`file_result_changes` reads a template/copy task's diff (the fleet_report
callback, for provision).

Runs on the managed node and on the controller (Python 3.11, stdlib only).
"""

from __future__ import annotations

import hashlib
import os
import stat

__all__ = [
    "BOOT_ROLES",
    "compare",
    "content_change",
    "digest",
    "file_result_changes",
    "file_state",
    "mode_change",
    "mode_text",
    "unit_change",
    "unit_enabled",
]

# The roles that write boot files (nccl_topology and gpu_pinning write their files through their
# modules, which report them as nccl_topology.file and gpu_pinning.instance[...]).
BOOT_ROLES = ("rdma_link", "rdma_qos", "gpu_power")

# `systemctl is-enabled` states that exit 0 yet ansible.builtin.systemd_service enables anyway.
_NOT_ENABLED_ON_ZERO = ("enabled-runtime", "indirect", "alias")

_CHUNK = 1 << 16


def digest(hexdigest):
    """How a file's content is named in a change: 'sha256:' and the first 16 hex digits."""
    return "sha256:" + hexdigest[:16]


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def mode_text(mode):
    """'0644' for 0o644 or '644'/'0644' (how the file module names modes in its diff)."""
    value = mode if isinstance(mode, int) else int(str(mode), 8)
    return "0%03o" % stat.S_IMODE(value)


def content_change(role, path, found, expected):
    """found: the node's sha256 hex (None: no file; 'unknown' when it could not be read)."""
    return {
        "setting": "%s.boot_file[%s]" % (role, path),
        "from": found if found in (None, "unknown") else digest(found),
        "to": digest(expected),
    }


def mode_change(role, path, found, expected):
    return {"setting": "%s.boot_file_mode[%s]" % (role, path), "from": found, "to": expected}


def unit_change(role, unit, found, expected=True):
    return {"setting": "%s.boot_unit_enabled[%s]" % (role, unit), "from": found, "to": expected}


def compare(role, expected, found):
    """One role's boot-file changes, in the order of ``expected``.

    expected: ``[{path, sha256, mode, unit}]`` - what the role writes (sha256 hex of the content,
    mode as '0644', unit the name it enables or None). found: ``{"files": {path: {sha256, mode} or
    None}, "units": {unit: enabled}}`` - what the node has (a missing file is None; a unit missing
    from "units" was not looked up).
    """
    changes = []
    files = found.get("files") or {}
    units = found.get("units") or {}
    for want in expected:
        path, mode = want["path"], mode_text(want["mode"])
        have = files.get(path)
        if have is None or have["sha256"] != want["sha256"]:
            changes.append(
                content_change(role, path, None if have is None else have["sha256"], want["sha256"])
            )
            continue
        if mode_text(have["mode"]) != mode:
            changes.append(mode_change(role, path, mode_text(have["mode"]), mode))
            continue
        unit = want.get("unit")
        if unit and units.get(unit) is False:
            changes.append(unit_change(role, unit, False))
    return changes


def file_state(path):
    """``{sha256, mode}`` of a file on this node, or None when there is none. A directory or an
    unreadable file raises OSError (the comparison cannot be made)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):  # a directory, or a FIFO that would block the read
        raise OSError("%s is not a regular file" % path)
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            sha.update(chunk)
    return {"sha256": sha.hexdigest(), "mode": mode_text(info.st_mode)}


def unit_enabled(rc, out):
    """Whether ``systemctl is-enabled <unit>`` (rc, stdout) says enabled, as ansible.builtin.systemd_service
    reads it: exit 0, except for the states it enables anyway."""
    return rc == 0 and out.strip() not in _NOT_ENABLED_ON_ZERO


def _text_sha256(text):
    return sha256_hex(text.encode("utf-8", "surrogateescape"))


def file_result_changes(role, path, diff):
    """The boot-file changes of a changed ansible.builtin.template/copy task, from its diff.

    Content that differs gives a list of ``{before, after, before_header, after_header}`` (the
    action's diff; ``before`` is '' without ``before_header`` for a missing file, and absent for a
    binary or oversized one); only the mode differing gives the file module's ``{before: {mode},
    after: {mode}}``. Anything else (no diff) gives no change.
    """
    if isinstance(diff, dict):
        before, after = diff.get("before"), diff.get("after")
        if isinstance(before, dict) and isinstance(after, dict) and "mode" in after:
            if before.get("mode") != after["mode"]:
                return [mode_change(role, path, before.get("mode"), mode_text(after["mode"]))]
            return []
        diff = [diff]
    changes = []
    for entry in diff or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("after"), str):
            continue
        before = entry.get("before")
        if not isinstance(before, str):
            found = "unknown"
        elif "before_header" not in entry and before == "":
            found = None
        else:
            found = _text_sha256(before)
        expected = _text_sha256(entry["after"])
        if found != expected:
            changes.append(content_change(role, path, found, expected))
    return changes
