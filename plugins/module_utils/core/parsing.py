# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the tool output parsers (nvidia_smi, rdma, lldp, sonic_qos, roce_counters, topology_xml,
vllm_metrics) share: the guard that turns a slip on malformed output into the parser's own
ParseError naming the tool, the check that every reading a parser returns is a number a tool can
print (finite, within 64 bits, and not negative where the tool has no negative values), and the
refusal of digits no tool prints (str.isdigit(), int(), float() and re's \\d take Arabic-Indic,
full-width and other Unicode digits as numbers), and the strict readers of a number (whole, decimal,
hexadecimal): int() and float() also read '3_0' as 30 and '4_00' as 400.

Pure (no I/O); runs on the managed node (Python 3.11, stdlib only).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

# No tool we parse prints a reading wider than 64 bits; a longer run of digits is damage.
READING_LIMIT = 2**64

# A decimal digit that is not 0-9 (re's \d is every Unicode decimal digit in a str pattern).
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")

# How much of a line or value an error message quotes.
QUOTE_LIMIT = 80


def non_ascii_digit(text: str) -> str | None:
    """Why ``text`` holds a digit outside ASCII ('U+0663 ...'), or None. No tool we parse prints
    one, and Python reads them as numbers: output holding one is damaged or forged, never data."""
    if text.isascii():
        return None
    found = _NON_ASCII_DIGIT.search(text)
    if found is None:
        return None
    return "U+%04X (a digit that is not 0-9) at character %d" % (ord(found.group()), found.start())


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as an error message quotes it: repr() of at most ``limit`` characters, and how
    long it was when cut (a 2 MiB line must not become a 2 MiB message)."""
    if len(text) <= limit:
        return repr(text)
    return "%r... (%d characters)" % (text[:limit], len(text))


# What a tool prints for a count and for a reading: ASCII digits, a decimal point in a reading.
_WHOLE = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_HEXADECIMAL = re.compile(r"0[xX][0-9a-fA-F]+")


def whole(text: str, what: str) -> int:
    """``text`` as a whole number when it is nothing but 0-9, else ValueError naming ``what``. Python's
    int() also reads '3_0' as 30, '+3', ' 3' and '٣': no tool prints those for a count, and a cut or
    damaged value must be refused, not read as another number (the guard names the tool)."""
    if not (isinstance(text, str) and _WHOLE.fullmatch(text)):
        raise ValueError("%s %s is not a whole number (digits 0-9 only)" % (what, quote(str(text))))
    return int(text)


def decimal(text: str, what: str) -> float:
    """``text`` as a number when it is 0-9 with at most one decimal point between digits, else
    ValueError naming ``what`` (float() also takes '4_00', '1e3', 'inf' and ' 4')."""
    if not (isinstance(text, str) and _DECIMAL.fullmatch(text)):
        raise ValueError(
            "%s %s is not a number (digits 0-9 and a decimal point only)" % (what, quote(str(text)))
        )
    return float(text)


def hexadecimal(text: str, what: str) -> int:
    """``text`` as '0x' and hex digits, else ValueError naming ``what`` (int(text, 16) also takes
    '0x1_0' and '10' without its 0x)."""
    if not (isinstance(text, str) and _HEXADECIMAL.fullmatch(text)):
        raise ValueError(
            "%s %s is not a hexadecimal number (0x and 0-9, a-f only)" % (what, quote(str(text)))
        )
    return int(text, 16)


def bad_reading(data: Any, non_negative: bool = True, signed: frozenset[str] = frozenset()) -> str | None:
    """Why ``data`` (a parser's result: dicts, lists, str, numbers) holds a reading no tool prints,
    or None. Floats must be finite; every number must fit 64 bits and, with ``non_negative``, be
    >= 0, except the values of dict keys in ``signed`` (a margin such as T.Limit can go below 0).
    Bools are flags, not readings. Walks without recursion, so any nesting is fine."""
    stack: list[tuple[Any, bool]] = [(data, non_negative)]
    while stack:
        item, must_be_positive = stack.pop()
        if item is None or isinstance(item, (bool, str, bytes)):
            continue
        if isinstance(item, (int, float)):
            if isinstance(item, float) and not math.isfinite(item):
                return "reading %r is not a finite number" % item
            if abs(item) >= READING_LIMIT:
                return "reading %s is out of range" % (
                    ("%.3g" % item) if isinstance(item, float) else "%d digits long" % len(str(abs(item)))
                )
            if must_be_positive and item < 0:
                return "reading %r is negative" % item
        elif isinstance(item, dict):
            stack.extend((key, must_be_positive) for key in item)
            stack.extend((value, must_be_positive and key not in signed) for key, value in item.items())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((value, must_be_positive) for value in item)
    return None


def has_surrogates(text: str) -> bool:
    """True when ``text`` carries bytes that were not UTF-8 (decoded with surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def load_json(text: str, error: type[Exception], tool: str) -> Any:
    """``tool``'s JSON output, or ``error`` naming the tool: bytes that were not UTF-8, nesting past
    Python's recursion limit and anything that is not JSON are all the tool's output's fault."""
    if has_surrogates(text):
        raise error("%s: output is not UTF-8" % tool)
    try:
        data = json.loads(text)
    except RecursionError:
        raise error("%s: JSON nested too deeply to read" % tool) from None
    except ValueError as exc:
        raise error("%s: output is not JSON (%s)" % (tool, exc)) from None
    # a "\u0663" escape is ASCII text the guard let through, and a digit once decoded
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            digit = non_ascii_digit(item)
            if digit is not None:
                raise error(
                    "%s: %s in the string %s: not a number this tool prints" % (tool, digit, quote(item))
                )
    return data


def guard(
    error: type[Exception],
    tool: str,
    allow_empty: bool = False,
    complete: bool = False,
    non_negative: bool = True,
    signed: frozenset[str] = frozenset(),
    max_line: int | None = None,
) -> Callable[[Any], Any]:
    """Decorate a parser of ``tool``'s output. No text, or blank text unless ``allow_empty``, raises
    ``error`` ('<tool>: empty output'); with ``complete``, text whose last line has no newline
    raises it too (the tool ends every line with one: the output was cut, perhaps inside a value).
    A digit outside 0-9 anywhere (:func:`non_ascii_digit`) raises it, and so does, with
    ``max_line``, a line longer than any the tool prints (a parser's regex stays linear).
    A ValueError, LookupError, AttributeError, TypeError, ArithmeticError or RecursionError inside
    becomes ``error`` naming the tool, and so does a result holding a reading no tool prints
    (:func:`bad_reading`). Modules catch ``error`` to fail with a clear message; an IndexError from
    a half-written line must not become a traceback, nor an Inf a passing check."""

    def wrap(func: Any) -> Any:
        @functools.wraps(func)
        def inner(text: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(text, str) or not (text.strip() or allow_empty):
                raise error("%s: empty output" % tool)
            if complete and text.strip() and "\n" not in text[len(text.rstrip()) :]:
                raise error("%s: output does not end with a newline (cut short?)" % tool)
            digit = non_ascii_digit(text)
            if digit is not None:
                raise error("%s: %s in the output: not a number this tool prints" % (tool, digit))
            if max_line is not None:
                longest = max(text.splitlines() or [""], key=len)
                if len(longest) > max_line:
                    raise error(
                        "%s: a line of %d characters (the tool prints none over %d): %s"
                        % (tool, len(longest), max_line, quote(longest))
                    )
            try:
                result = func(text, *args, **kwargs)
            except error:
                raise
            except (
                ValueError,
                LookupError,
                AttributeError,
                TypeError,
                ArithmeticError,
                RecursionError,
            ) as exc:
                raise error("%s: unexpected output (%s)" % (tool, exc)) from exc
            why = bad_reading(result, non_negative, signed)
            if why is not None:
                raise error("%s: %s" % (tool, why))
            return result

        return inner

    return wrap
