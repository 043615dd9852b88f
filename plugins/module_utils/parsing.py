# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tool output parsers (nvidia_smi, rdma) share: the guard that turns a slip on malformed
output into the parser's own ParseError, naming the tool.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def guard(error: type[Exception], tool: str, allow_empty: bool = False) -> Callable[[Any], Any]:
    """Decorate a parser of ``tool``'s output. No text, or blank text unless ``allow_empty``, raises
    ``error`` ('<tool>: empty output'); a ValueError, LookupError, AttributeError or TypeError inside
    becomes ``error`` naming the tool. Modules catch ``error`` to fail with a clear message; an
    IndexError from a half-written line must not become a traceback."""

    def wrap(func: Any) -> Any:
        @functools.wraps(func)
        def inner(text: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(text, str) or not (text.strip() or allow_empty):
                raise error("%s: empty output" % tool)
            try:
                return func(text, *args, **kwargs)
            except error:
                raise
            except (ValueError, LookupError, AttributeError, TypeError) as exc:
                raise error("%s: unexpected output (%s)" % (tool, exc)) from exc

        return inner

    return wrap
