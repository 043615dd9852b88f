"""A fake tool's refused command line, as the real tools answer one: the message on stderr (with the
tool's hint, where it prints one) and exit status 1."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """A command line the real tool refuses; the message is the tool's own wording."""


def refused(err: UsageError, hint: str = "") -> int:
    sys.stderr.write(f"{err}\n" + (f"{hint}\n" if hint else ""))
    return 1
