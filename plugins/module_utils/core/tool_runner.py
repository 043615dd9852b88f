# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How every gpufleet module runs a device tool: where the tool is, argv lists, the C locale, and a
failure message the operator can act on (the command, its exit status, the first line it printed,
and what to do next).

In the spirit of community.general's cmd_runner, kept to what these modules need. Runs on the
managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import os
from typing import Any

# Tool messages and number formats are only stable in the C locale.
ENV = {"LC_ALL": "C"}

# AnsibleModule.run_command stops reading when select() waited its 1 s with no output and the process
# has exited by then: output written in between is dropped. With many threads contending for the GIL
# (drift's concurrent roles, the burn-in's load threads) that window is wide (measured: 5 of 80
# concurrent runs of a tool printing at ~1 s came back empty, rc 0), so a read that comes back empty
# with rc 0 is run again, at most this many times. Every tool gpufleet reads prints something when it
# succeeds.
EMPTY_RETRIES = 2

# How much of a tool's stdout or stderr a failure result carries: enough to see what it printed,
# never the whole of a runaway output (ansible-runner passes on an empty result in place of one over
# 700000 characters, and the failure's message with it).
OUTPUT_KEPT = 16 * 1024


# How much of that first line a message quotes.
LINE_KEPT = 300


def first_line(*texts: str | None) -> str:
    """The first non-blank line of the first text that has one ('no output' when none has), its first
    LINE_KEPT characters when longer (a message stays a sentence)."""
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                line = line.strip()
                if len(line) > LINE_KEPT:
                    return "%s... (a line of %d characters)" % (line[:LINE_KEPT], len(line))
                return line
    return "no output"


def kept(text: str | None, limit: int = OUTPUT_KEPT) -> str | None:
    """``text`` as a failure result carries it: whole up to ``limit`` characters, else its first
    ``limit`` and how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return "%s\n[... %d more characters not kept]" % (text[:limit], len(text) - limit)


def tool_path(module: Any, name: str, *alternatives: str, required: bool = True) -> str | None:
    """The path of ``name`` (or the first of ``alternatives``) on PATH; fails the module when required
    and none is installed, None otherwise."""
    for candidate in (name, *alternatives):
        path = module.get_bin_path(candidate)
        if path:
            return path
    if required:
        names = " or ".join((name, *alternatives))
        module.fail_json(msg="%s is not installed on this node (not on PATH); install it or fix PATH" % names)
    return None


def nvidia_smi(module: Any, path: str | None = None) -> str:
    """nvidia-smi: ``path`` (the module's nvidia_smi_path option) when given, else the one on PATH."""
    if path is None:
        return tool_path(module, "nvidia-smi")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        module.fail_json(msg="nvidia_smi_path %s is not an executable file; point it at nvidia-smi" % path)
    return path


def run(
    module: Any, cmd: list[str], hint: str = "", check: bool = True, **extra: Any
) -> tuple[int, str, str]:
    """``(rc, stdout, stderr)`` of ``cmd`` in the C locale. With ``check``, a non-zero exit fails the
    module (:func:`check_exit`)."""
    ran = module.run_command(cmd, environ_update=ENV)
    if check:
        check_exit(module, cmd, ran, hint, **extra)
    return ran


def read_command(run_command: Any, cmd: list[str], **kwargs: Any) -> tuple[int, str, str]:
    """``run_command(cmd, **kwargs)`` for a read: run again while it comes back empty with rc 0
    (EMPTY_RETRIES). Never for a command that changes something."""
    for _attempt in range(EMPTY_RETRIES):
        rc, out, err = run_command(cmd, **kwargs)
        if rc != 0 or out or err:
            return rc, out, err
    return run_command(cmd, **kwargs)


def read(module: Any, cmd: list[str]) -> tuple[int, str, str]:
    """``(rc, stdout, stderr)`` of a read-only ``cmd`` in the C locale (:func:`read_command`)."""
    return read_command(module.run_command, cmd, environ_update=ENV)


def check_exit(module: Any, cmd: list[str], ran: tuple[int, str, str], hint: str = "", **extra: Any) -> None:
    """Fail the module when ``ran`` (what ``cmd`` returned) is a non-zero exit: '<cmd> failed (rc=N):
    <first line>. <hint>', with cmd, rc, stdout and stderr (:func:`kept`) and ``extra`` (e.g. the
    changes made so far) in the result."""
    rc, out, err = ran
    if rc != 0:
        message = "%s failed (rc=%d): %s." % (" ".join(cmd), rc, first_line(err, out).rstrip("."))
        module.fail_json(
            msg=message + (" " + hint if hint else ""),
            cmd=cmd,
            rc=rc,
            stdout=kept(out),
            stderr=kept(err),
            **extra,
        )


def parsed(
    module: Any, cmd: list[str], ran: tuple[int, str, str], parser: Any, hint: str = "", **extra: Any
) -> Any:
    """What ``cmd`` printed (``ran``: its ``(rc, stdout, stderr)``), read by ``parser`` (None: the
    text). A non-zero exit fails the module (:func:`check_exit`), and so does an unreadable output
    (the parser's ValueError, which every gpufleet parse error is)."""
    check_exit(module, cmd, ran, hint, **extra)
    rc, out, err = ran
    if parser is None:
        return out
    try:
        return parser(out)
    except ValueError as exc:
        module.fail_json(
            msg="Could not read the output of %s: %s. Run it by hand on this node to see what it prints."
            % (" ".join(cmd), exc),
            cmd=cmd,
            rc=rc,
            stdout=kept(out),
            stderr=kept(err),
            **extra,
        )


def run_parsed(module: Any, cmd: list[str], parser: Any, hint: str = "", **extra: Any) -> Any:
    """What ``cmd`` printed, read by ``parser`` (:func:`parsed`)."""
    return parsed(module, cmd, run(module, cmd, check=False), parser, hint, **extra)
