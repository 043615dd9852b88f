# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot files of the roles (the scripts, confs and units that re-apply settings at boot), as changes.

rdma_link, rdma_qos and gpu_power write files that re-apply their settings at every boot, and enable
the units that run them. Each role's module renders its files in Python (module_utils.rdma.rdma_link,
rdma_qos, gpu_power), reads what the node has (:func:`read`), names what differs (:func:`compare`)
and, outside check mode, writes them (:func:`write`): atomically, with their mode, a script checked
with ``sh -n`` before it replaces the old one, ``systemctl daemon-reload`` when a unit file changed,
and ``systemctl enable``. node_facts (drift) runs the same plan and compares the same way, so a boot
file edited by hand is named the same by provision --check and drift:

- ``<role>.boot_file[<path>]``: from ``None`` (no file) or ``sha256:<16 hex>`` of the node's file, to
  ``sha256:<16 hex>`` of what the role writes;
- ``<role>.boot_file_mode[<path>]``: from and to ``'0644'``-style modes, only when the content is
  right (a file whose content is wrong is rewritten with its mode: one change);
- ``<role>.boot_unit_enabled[<unit>]``: from ``False`` to ``True`` when ``systemctl is-enabled`` says
  the unit is not enabled (also when its file is missing: a run writes it and enables it, so check mode
  and drift name both changes, as the run makes them).

Every file starts with :func:`header` (after a script's ``#!`` line) and carries no timestamp, so its
digest only changes when what it does changes.

Runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile

from ansible_collections.gpufleet.node.plugins.module_utils.core import tool_runner
from ansible_collections.gpufleet.node.plugins.module_utils.core.results import change

# The roles that write boot files (nccl_topology and gpu_pinning write their files through their
# modules, which report them as nccl_topology.file and gpu_pinning.instance[...]).
BOOT_ROLES = ("rdma_link", "rdma_qos", "gpu_power")

# Prefix of every boot file path on this node ("": the paths as named). Unit tests point it at a
# temporary directory; the names in changes never carry it.
ROOT = ""

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
    return change(
        "%s.boot_file[%s]" % (role, path),
        found if found in (None, "unknown") else digest(found),
        digest(expected),
    )


def mode_change(role, path, found, expected):
    return change("%s.boot_file_mode[%s]" % (role, path), found, expected)


def unit_change(role, unit, found, expected=True):
    return change("%s.boot_unit_enabled[%s]" % (role, unit), found, expected)


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
        elif mode_text(have["mode"]) != mode:
            changes.append(mode_change(role, path, mode_text(have["mode"]), mode))
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


def header(module):
    """The first line of every file a module writes (after a script's #! line)."""
    return "# managed by gpufleet.node.%s; edits are overwritten\n" % module


_ONESHOT_UNIT = """[Unit]
Description=%s
Documentation=%s
After=%s
Wants=network-pre.target
Before=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh %s

[Install]
WantedBy=multi-user.target
"""


def oneshot_unit(module, description, documentation, after, script):
    """The text of a unit that runs ``script`` once at boot, after the units ``after`` (a space-separated
    list) and before the network is up, so the settings it re-applies are in place before traffic."""
    return header(module) + _ONESHOT_UNIT % (description, documentation, after, script)


def reapply_files(module, script_path, unit, intro, commands, description, documentation, after):
    """The boot script that re-applies a module's settings and the oneshot unit ``unit`` that runs it
    (:func:`oneshot_unit`): ``[boot_file(script), boot_file(unit)]``. The script runs every command
    (a ``# ...`` line is a comment) and fails when one of them did; ``intro`` starts its comment."""
    body = "".join(line + "\n" if line.startswith("#") else "%s || rc=1\n" % line for line in commands)
    script = (
        header(module)
        + intro
        + "Run by %s;\n# every line runs, and the script fails when one of them did.\nrc=0\n" % unit
        + body
        + 'exit "$rc"\n'
    )
    unit_text = oneshot_unit(module, description, documentation, after, script_path)
    return [
        boot_file(script_path, script, script=True),
        boot_file("/etc/systemd/system/" + unit, unit_text, unit=unit),
    ]


def boot_file(path, text, mode="0644", unit=None, script=False):
    """One file a role writes: ``{path, text, sha256, mode, unit, script}`` (unit: the name it
    enables, or None; script: checked with ``sh -n`` before it replaces the old file)."""
    return {
        "path": path,
        "text": text,
        "sha256": sha256_hex(text.encode("utf-8")),
        "mode": mode,
        "unit": unit,
        "script": script,
    }


def _local(path):
    return ROOT + path if ROOT else path


def read(node, files):
    """What the node has of ``files``: ``{"files": {path: {sha256, mode} or None}, "units": {unit:
    enabled}}`` (``systemctl is-enabled``, read as ansible.builtin.systemd_service reads it)."""
    found = {"files": {}, "units": {}}
    for entry in files:
        try:
            state = file_state(_local(entry["path"]))
        except OSError as exc:
            node.fail_json(msg="Could not read %s: %s; fix or remove it" % (entry["path"], exc))
        found["files"][entry["path"]] = state
        unit = entry.get("unit")
        if unit:
            systemctl = node.get_bin_path("systemctl", required=True)
            rc, out, _err = tool_runner.run(node, [systemctl, "is-enabled", unit], check=False)
            found["units"][unit] = unit_enabled(rc, out)
    return found


def diffs(files, found):
    """Ansible diffs (before/after with the path as header) of the files whose content changes."""
    result = []
    for entry in files:
        have = (found.get("files") or {}).get(entry["path"])
        if have is not None and have["sha256"] == entry["sha256"]:
            continue
        before = ""
        if have is not None:
            try:
                with open(_local(entry["path"]), encoding="utf-8", errors="replace") as handle:
                    before = handle.read()
            except OSError:
                before = ""
        result.append(
            {
                "before_header": entry["path"],
                "after_header": entry["path"],
                "before": before,
                "after": entry["text"],
            }
        )
    return result


def _check_script(node, entry, tmp, sh):
    rc, out, err = tool_runner.run(node, [sh, "-n", tmp], check=False)
    if rc != 0:
        os.unlink(tmp)
        node.fail_json(
            msg="The script for %s does not parse (sh -n: %s); the old file was left as it is"
            % (entry["path"], tool_runner.first_line(err, out)),
            rc=rc,
            stdout=out,
            stderr=err,
        )


def _write_file(node, entry):
    path = _local(entry["path"])
    directory = os.path.dirname(path)
    sh = node.get_bin_path("sh", required=True) if entry.get("script") else None
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755)
    fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(entry["text"])
    if sh:
        _check_script(node, entry, tmp, sh)
    os.chmod(tmp, int(entry["mode"], 8))
    node.atomic_move(tmp, path)
    # atomic_move keeps the old file's attributes: the mode is the role's.
    os.chmod(path, int(entry["mode"], 8))


def write(node, files, found):
    """Make the node's boot files ``files`` (``found``: :func:`read`), reload systemd when a unit file
    changed and enable the units that are not. Call outside check mode only."""
    have_files = found.get("files") or {}
    units = found.get("units") or {}
    reload_units = False
    for entry in files:
        have = have_files.get(entry["path"])
        if have is None or have["sha256"] != entry["sha256"]:
            _write_file(node, entry)
            reload_units = reload_units or bool(entry.get("unit"))
        elif mode_text(have["mode"]) != mode_text(entry["mode"]):
            os.chmod(_local(entry["path"]), int(entry["mode"], 8))
    enable = [e["unit"] for e in files if e.get("unit") and units.get(e["unit"]) is not True]
    if not (reload_units or enable):
        return
    systemctl = node.get_bin_path("systemctl", required=True)
    if reload_units:
        _systemctl(node, [systemctl, "daemon-reload"])
    for unit in enable:
        _systemctl(node, [systemctl, "enable", unit])


def _systemctl(node, argv):
    tool_runner.run(node, argv, "Check the unit with systemctl status.")
