"""Text gpufleet did not write - a node's output, an event, a lock record, a host name - as it may be
shown to people: every control character written out as an escape (``\\x1b``, ``\\u202e``), so none
reaches a terminal, report.md, report.html or gpufleet.prom as what it does (clear the screen, move
the cursor, end a line or a label, turn the text around). The one place that decides which
characters those are; report.json keeps the text as it came (JSON escapes them itself).
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; the bidirectional marks, embeddings, overrides and isolates (they
# reorder what a reader sees); the line and paragraph separators (a new line to some readers); lone
# surrogates (no encoder writes them).
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_ALL = re.compile(f"[\x00-\x1f{_OTHERS}]")
# the same less the tab and the new line, for text shown as lines (a command's output)
_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")


def escape(match: re.Match[str]) -> str:
    """One matched character as its escape (``\\x1b``, ``\\udcff``): for ``re.sub``, here and where
    only some of these characters are written out (event_shapes: lone surrogates)."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, lines: bool = False) -> str:
    """``text`` with each control character written out; ``lines``: new lines and tabs kept."""
    return (_IN_LINES if lines else _ALL).sub(escape, text)
