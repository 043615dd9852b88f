"""Hypothesis strategies that damage real tool captures the way a node, a pipe or a BMC can.

Shared by the parser property tests (``test_parser_properties.py``) and by any test that wants
"every input gives either data or our own parse error". Each strategy starts from a real capture
(``read_capture('nvidia-smi-xml/x.xml')``) and applies one to ``max_steps`` mutations:

* ``flip``: one character replaced (control characters, markup punctuation, non-ASCII, a lone
  surrogate as Python's surrogateescape decoding leaves for a non-UTF-8 byte)
* ``truncate``: the text cut at any point (a killed tool, a short read)
* ``delete_lines`` / ``duplicate_lines`` / ``move_lines``: a run of lines dropped, repeated, moved
* ``number``: one number (or every copy of it) replaced by NaN, Inf, 1e999, a 400-digit integer,
  a negative, a zero or an out-of-range value (``NUMBER_REPLACEMENTS``)
* ``nest``: deep nesting: ``<tag>`` x N inside an XML element, ``[``/``{"a":`` x N around a JSON
  value, N ever deeper indented lines in indented text (N up to 5000, past Python's recursion limit)
* ``non_utf8``: a byte that is not UTF-8, as surrogateescape decodes it (``'\\udcff'``); on bytes,
  the raw byte, a cut multi-byte sequence or an overlong encoding
* ``digits``: the ASCII digits of one number (or of every copy of it, or one digit of it) written
  in another script's digits (Arabic-Indic, full-width, Devanagari, ...: ``DIGIT_ZEROS``), which
  str.isdigit(), int(), float() and re's ``\\d`` all read as numbers; in JSON also as ``\\u0663``
  escapes inside strings, in XML as ``&#1635;`` character references (ASCII text that decodes to
  such a digit)

``mutated(text, markup=...)`` draws str (what a parser gets after ``run_command`` decoded the
output); ``mutated_bytes(data, markup=...)`` draws bytes (what an HTTP body or a file read gives).
``markup`` is ``"xml"``, ``"json"`` or ``"text"`` (indented or line-oriented text) and picks the
nesting mutation. Use with ``settings(max_examples=..., deadline=None, derandomize=True)`` so a
run is the same everywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# tests/fixtures/real, or GPUFLEET_FIXTURES (as tests/unit/conftest.py).
FIXTURES = Path(
    os.environ.get("GPUFLEET_FIXTURES") or Path(__file__).resolve().parents[1] / "fixtures" / "real"
)

MARKUPS = ("text", "xml", "json")

# What a number in a capture can become. Non-finite (every spelling Python or Prometheus accepts),
# overflowing (1e999 is inf as a float; the 400-digit integer overflows float() and int->str limits
# stay clear of it), negative, zero, just out of a 0..1 or 0..100 range, huge, and digits that
# str.isdigit() or int() accept but a tool never prints.
NUMBER_REPLACEMENTS = (
    "NaN",
    "nan",
    "-nan",
    "Inf",
    "+Inf",
    "-Inf",
    "inf",
    "Infinity",
    "1e999",
    "-1e999",
    "1e308",
    "9" * 400,
    "-" + "9" * 400,
    "18446744073709551616",
    "-1",
    "-0",
    "-835",
    "-0.5",
    "0",
    "0.0",
    "1.5",
    "2",
    "7",
    "9.0",
    "101",
    "900",
    "4.9e-324",
    "0x10",
    "1_000",
    "\u0661\u0662\u0663",  # Arabic-Indic digits: int() reads 123
    "\u00b2",  # superscript two: isdigit() is True, int() fails
    "",
)

# Characters a flip writes: controls, every markup's punctuation, non-ASCII, a lone surrogate.
FLIP_CHARS = (
    "\x00",
    "\t",
    "\n",
    "\r",
    "\x1b",
    "\x7f",
    " ",
    "<",
    ">",
    "/",
    "&",
    '"',
    "'",
    ":",
    ",",
    ";",
    "=",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "#",
    "\\",
    "-",
    ".",
    "0",
    "9",
    "x",
    "\u00e9",
    "\u2028",
    "\ufeff",
    "\U0001f600",
    "\udcff",
)

# Non-UTF-8 input: a lone continuation byte, a latin-1 byte, a cut 2- and 3-byte sequence, an
# overlong '/', a byte UTF-8 never uses.
NON_UTF8_BYTES = (b"\x80", b"\xe9", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xff")

NEST_DEPTHS = (3, 64, 1100, 1500, 5000)

# The zero of digit sets Python reads as numbers: Arabic-Indic, Extended Arabic-Indic, Devanagari,
# Bengali, Thai, full-width, mathematical bold (outside the BMP).
DIGIT_ZEROS = (0x0660, 0x06F0, 0x0966, 0x09E6, 0x0E50, 0xFF10, 0x1D7CE)

_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_XML_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)(?:\s[^<>]*?)?(?<!/)>")
_JSON_SCALAR = re.compile(
    r'(?<=[:\[,])\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|"(?:[^"\\]|\\.)*")'
)

Draw = Callable[..., Any]


def read_capture(relpath: str) -> str:
    """A real capture's text exactly as stored (newline="" keeps CR, tabs and trailing blanks)."""
    with (FIXTURES / relpath).open(encoding="utf-8", newline="") as handle:
        return handle.read()


def surrogate_escape(data: bytes) -> str:
    """bytes -> str the way a tool's output reaches a parser when it is not UTF-8."""
    return data.decode("utf-8", errors="surrogateescape")


# ------------------------------------------------------------------ single mutations on str


def _flip(draw: Draw, text: str, markup: str) -> str:
    if not text:
        return text
    pos = draw(st.integers(0, len(text) - 1))
    char: str = draw(st.sampled_from(FLIP_CHARS))
    return text[:pos] + char + text[pos + 1 :]


def _truncate(draw: Draw, text: str, markup: str) -> str:
    return text[: draw(st.integers(0, max(len(text) - 1, 0)))]


def _line_span(draw: Draw, lines: list[str]) -> tuple[int, int]:
    start = draw(st.integers(0, max(len(lines) - 1, 0)))
    length = draw(st.integers(1, 8))
    return start, min(start + length, len(lines))


def _delete_lines(draw: Draw, text: str, markup: str) -> str:
    lines = text.splitlines(keepends=True)
    start, end = _line_span(draw, lines)
    return "".join(lines[:start] + lines[end:])


def _duplicate_lines(draw: Draw, text: str, markup: str) -> str:
    lines = text.splitlines(keepends=True)
    start, end = _line_span(draw, lines)
    times = draw(st.sampled_from((1, 2, 7)))
    return "".join(lines[:end] + lines[start:end] * times + lines[end:])


def _move_lines(draw: Draw, text: str, markup: str) -> str:
    lines = text.splitlines(keepends=True)
    start, end = _line_span(draw, lines)
    moved, rest = lines[start:end], lines[:start] + lines[end:]
    to = draw(st.integers(0, len(rest)))
    return "".join(rest[:to] + moved + rest[to:])


def _number(draw: Draw, text: str, markup: str) -> str:
    found = list(_NUMBER.finditer(text))
    if not found:
        return _flip(draw, text, markup)
    match: re.Match[str] = draw(st.sampled_from(found))
    value: str = draw(st.sampled_from(NUMBER_REPLACEMENTS))
    if draw(st.booleans()):
        # every copy of that number in a row: a counter pair, a whole column
        return re.sub(r"(?<![\w.])" + re.escape(match.group(0)) + r"(?![\w])", lambda _: value, text)
    return text[: match.start()] + value + text[match.end() :]


def _nest(draw: Draw, text: str, markup: str) -> str:
    depth: int = draw(st.sampled_from(NEST_DEPTHS))
    closed: bool = draw(st.booleans())
    if markup == "xml":
        opens = list(_XML_OPEN.finditer(text))
        if not opens:
            return _flip(draw, text, markup)
        at: re.Match[str] = draw(st.sampled_from(opens))
        tag: str = draw(st.sampled_from(sorted({m.group(1) for m in opens})))
        inner = f"<{tag}>" * depth + (f"</{tag}>" * depth if closed else "")
        return text[: at.end()] + inner + text[at.end() :]
    if markup == "json":
        scalars = list(_JSON_SCALAR.finditer(text))
        if not scalars:
            return "[" * depth + text + ("]" * depth if closed else "")
        where: re.Match[str] = draw(st.sampled_from(scalars))
        opener: str
        closer: str
        opener, closer = draw(st.sampled_from((("[", "]"), ('{"a":', "}"))))
        inner = opener * depth + where.group(1) + (closer * depth if closed else "")
        return text[: where.start(1)] + inner + text[where.end(1) :]
    # indented text: a staircase of key lines, each one deeper than the last
    lines = text.splitlines(keepends=True)
    line: int = draw(st.integers(0, len(lines)))
    key: str = draw(st.sampled_from(("Key", "GPU", "Port")))
    stairs = "".join(" " * (i + 1) + f"{key} : {i}\n" for i in range(depth))
    return "".join(lines[:line]) + stairs + "".join(lines[line:])


def _non_utf8(draw: Draw, text: str, markup: str) -> str:
    pos = draw(st.integers(0, len(text)))
    return text[:pos] + surrogate_escape(draw(st.sampled_from(NON_UTF8_BYTES))) + text[pos:]


def _foreign_digits(draw: Draw, digits: str, markup: str) -> tuple[str, str]:
    """ASCII digits written with another digit set: as characters, or (JSON, XML) as the escape
    the markup decodes into them; and the same text with a 'Z' for each such digit instead."""
    zero: int = draw(st.sampled_from(DIGIT_ZEROS))
    form = draw(st.sampled_from(("raw", "escaped"))) if markup in ("json", "xml") else "raw"
    out, spoiled = [], []
    for char in digits:
        if not char.isdigit():
            out.append(char)
            spoiled.append(char)
            continue
        code = zero + int(char)
        spoiled.append("Z")
        if form == "raw":
            out.append(chr(code))
        elif markup == "xml":
            out.append(f"&#{code};")
        else:
            # a JSON string's escape (a UTF-16 surrogate pair outside the BMP)
            units = chr(code).encode("utf-16-be")
            out.append("".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)))
    return "".join(out), "".join(spoiled)


def _swap_digits(draw: Draw, text: str, markup: str) -> tuple[str, str]:
    found = list(_NUMBER.finditer(text))
    if not found:
        pos = draw(st.integers(0, len(text)))
        return text[:pos] + chr(draw(st.sampled_from(DIGIT_ZEROS)) + 3) + text[pos:], text[:pos] + "Z" + text[
            pos:
        ]
    match: re.Match[str] = draw(st.sampled_from(found))
    number = match.group(0)
    how = draw(st.sampled_from(("one", "every copy", "one digit")))
    if how == "one digit":
        at: int = draw(st.sampled_from([i for i, char in enumerate(number) if char.isdigit()]))
        foreign, spoiled = _foreign_digits(draw, number[at], markup)
        value, junk = (number[:at] + v + number[at + 1 :] for v in (foreign, spoiled))
    else:
        value, junk = _foreign_digits(draw, number, markup)
    if how == "every copy":
        copies = re.compile(r"(?<![\w.])" + re.escape(number) + r"(?![\w])")
        return copies.sub(lambda _: value, text), copies.sub(lambda _: junk, text)
    before, after = text[: match.start()], text[match.end() :]
    return before + value + after, before + junk + after


def _digits(draw: Draw, text: str, markup: str) -> str:
    return _swap_digits(draw, text, markup)[0]


@st.composite
def digits_swapped(draw: Draw, text: str, markup: str = "text") -> tuple[str, str]:
    """``text`` with the ASCII digits of one number written in another digit set (the ``digits``
    mutation), and the same text with a 'Z' in place of each of those digits: where the parser
    reads a number, both must be refused; where it reads no number, both may be data."""
    return _swap_digits(draw, text, markup)


MUTATIONS: dict[str, Callable[[Draw, str, str], str]] = {
    "flip": _flip,
    "truncate": _truncate,
    "delete_lines": _delete_lines,
    "duplicate_lines": _duplicate_lines,
    "move_lines": _move_lines,
    "number": _number,
    "nest": _nest,
    "non_utf8": _non_utf8,
    "digits": _digits,
}


@st.composite
def mutated(
    draw: Draw, text: str, markup: str = "text", max_steps: int = 3, kinds: tuple[str, ...] | None = None
) -> str:
    """``text`` after 1..max_steps mutations drawn from ``kinds`` (default: all of MUTATIONS)."""
    if markup not in MARKUPS:
        raise ValueError(f"markup must be one of {', '.join(MARKUPS)}")
    names = tuple(kinds or MUTATIONS)
    for _ in range(draw(st.integers(1, max_steps))):
        text = MUTATIONS[draw(st.sampled_from(names))](draw, text, markup)
    return text


# ------------------------------------------------------------------ bytes (HTTP bodies, files)


def _byte_non_utf8(draw: Draw, data: bytes) -> bytes:
    pos = draw(st.integers(0, len(data)))
    raw: bytes = draw(st.sampled_from(NON_UTF8_BYTES))
    return data[:pos] + raw + data[pos:]


def _byte_cut(draw: Draw, data: bytes) -> bytes:
    """A cut anywhere, the middle of a multi-byte character included."""
    return data[: draw(st.integers(0, max(len(data) - 1, 0)))]


def _byte_flip(draw: Draw, data: bytes) -> bytes:
    if not data:
        return data
    pos = draw(st.integers(0, len(data) - 1))
    return data[:pos] + bytes([draw(st.integers(0, 255))]) + data[pos + 1 :]


@st.composite
def mutated_bytes(draw: Draw, data: bytes, markup: str = "json", max_steps: int = 3) -> bytes:
    """``data`` after 1..max_steps mutations: the str ones (on its UTF-8 text) and raw-byte ones."""
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from((*MUTATIONS, "byte_flip", "byte_cut", "byte_non_utf8")))
        if kind == "byte_flip":
            data = _byte_flip(draw, data)
        elif kind == "byte_cut":
            data = _byte_cut(draw, data)
        elif kind == "byte_non_utf8":
            data = _byte_non_utf8(draw, data)
        else:
            text = MUTATIONS[kind](draw, surrogate_escape(data), markup)
            data = text.encode("utf-8", errors="surrogateescape")
    return data
