"""The fake `dmesg`: the simulated node's kernel log since boot (sim/kernel_log.py).

Supported: no option (``[  123.456789] text``, seconds since boot as util-linux prints them),
``-T``/``--ctime`` (``[Sun Feb 23 16:24:18 2025] text``), ``--time-format ctime|iso|notime|raw``
(iso: ``2024-11-15T12:02:03,470068+00:00 text``), ``-t``/``--notime``, ``-x``/``--decode``
(``kern  :warn  : `` in front), ``-k``/``--kernel`` (everything here is the kernel's), and
``-C``/``--clear``, ``-c``/``--read-clear``. Formats as in the real captures in
tests/fixtures/real/xid. An unknown option: util-linux's message on stderr, exit 1.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from gpufleet_sim import kernel_log
from gpufleet_sim import state as sim_state
from gpufleet_sim.tools import usage
from gpufleet_sim.tools.usage import UsageError

_FORMATS = ("raw", "ctime", "iso", "notime")
_LONG = {"--ctime": "ctime", "--notime": "notime", "--decode": "decode", "--kernel": "kernel"}
_LONG.update({"--clear": "clear", "--read-clear": "read-clear"})
_SHORT = {"T": "ctime", "t": "notime", "x": "decode", "k": "kernel", "C": "clear", "c": "read-clear"}


def parse(argv: list[str]) -> tuple[str, set[str]]:
    """(time format, flags) of the command line; UsageError with util-linux's wording."""
    fmt, flags = "raw", set()
    pos = 0
    while pos < len(argv):
        arg = argv[pos]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name == "--time-format":
                if not eq:
                    pos += 1
                    if pos >= len(argv):
                        raise UsageError("dmesg: option '--time-format' requires an argument")
                    value = argv[pos]
                if value not in _FORMATS:
                    raise UsageError(f"dmesg: unknown time format: {value}")
                fmt = value
            elif name in _LONG and not eq:
                flags.add(_LONG[name])
            else:
                raise UsageError(f"dmesg: unrecognized option '{arg}'")
        elif arg.startswith("-") and len(arg) > 1:
            for letter in arg[1:]:
                if letter not in _SHORT:
                    raise UsageError(f"dmesg: invalid option -- '{letter}'")
                flags.add(_SHORT[letter])
        else:
            raise UsageError(f"dmesg: bad usage: {arg}")
        pos += 1
    if "ctime" in flags:
        fmt = "ctime"
    if "notime" in flags:
        fmt = "notime"
    return fmt, flags


def stamp(fmt: str, since_boot: float, boot_t: float) -> str:
    """The time in front of a line, with its trailing space ("" for notime)."""
    if fmt == "notime":
        return ""
    if fmt == "raw":
        seconds, micros = divmod(round(since_boot * 1_000_000), 1_000_000)
        return f"[{seconds:5d}.{micros:06d}] "
    when = datetime.datetime.fromtimestamp(boot_t + since_boot).astimezone()
    if fmt == "ctime":
        return f"[{when.strftime('%a %b %e %H:%M:%S %Y')}] "
    offset = when.strftime("%z")
    return f"{when.strftime('%Y-%m-%dT%H:%M:%S')},{when.microsecond:06d}{offset[:3]}:{offset[3:]} "


def render(state: sim_state.State, fmt: str, decode: bool) -> str:
    boot_t = float(state.get("kernel_log", {}).get("boot_t", 0.0))
    out = []
    for since_boot, level, text in kernel_log.entries(state):
        prefix = f"{'kern':<6}:{level:<6}: " if decode else ""
        out.append(f"{prefix}{stamp(fmt, since_boot, boot_t)}{text}\n")
    return "".join(out)


def main(argv: list[str], node_dir: Path) -> int:
    try:
        fmt, flags = parse(argv)
    except UsageError as err:
        return usage.refused(err, "Try 'dmesg --help' for more information.")
    if flags & {"clear", "read-clear"}:
        with sim_state.locked(node_dir) as state:
            text = "" if "clear" in flags else render(state, fmt, "decode" in flags)
            kernel_log.clear(state)
    else:
        text = render(sim_state.load(node_dir), fmt, "decode" in flags)
    sys.stdout.write(text)
    return 0
