"""Text helpers shared by the agent hooks and the profile memory.

Theory of operation
-------------------
Text that reaches a model from memory is *reference material*: a tool once read a file
saying "ignore previous instructions", and that text now sits in memory. The helpers here
keep such text from changing the shape of the prompt it is pasted into:

* :func:`escape_line` turns any text into exactly one line. A backslash becomes two
  backslashes, and every character that :meth:`str.splitlines` breaks on becomes a
  backslash escape (``\\n``, ``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``, ``\\x1d``,
  ``\\x1e``, ``\\x85``, ``\\u2028``, ``\\u2029``). :func:`unescape_line` inverts it, so no
  information is lost.
* :func:`cut` shortens a text to a number of code points and marks the cut with ``…``.

Both are pure functions with no I/O.
"""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "LINE_BREAKS", "cut", "escape_line", "unescape_line"]

#: Appended to a text that :func:`cut` shortened (U+2026 HORIZONTAL ELLIPSIS).
ELLIPSIS = "\u2026"

#: Every character :meth:`str.splitlines` treats as a line boundary, with its escape.
LINE_BREAKS: dict[str, str] = {
    "\n": "\\n",
    "\r": "\\r",
    "\x0b": "\\x0b",
    "\x0c": "\\x0c",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}

_ESCAPES = {"\\": "\\\\", **LINE_BREAKS}  # the backslash first (see escape_line)
_UNESCAPES = {escaped: raw for raw, escaped in _ESCAPES.items()}
_UNESCAPE_RE = re.compile("|".join(re.escape(e) for e in sorted(_UNESCAPES, key=len, reverse=True)))


def escape_line(text: str) -> str:
    """Make ``text`` one line: double backslashes, write line breaks as escapes.

    ``"a\\nb"`` (a real line feed) becomes ``"a\\\\nb"`` (backslash, ``n``). The result
    contains no character :meth:`str.splitlines` splits on.

    Runtime complexity: O(n) for n code points.
    """
    if text.isprintable() and "\\" not in text:
        return text  # nothing to escape (every line break is unprintable): two C scans
    # One str.replace per character (a C scan each, 5-10x faster than a regex sub with a
    # callback on a typical 1,000-character entry). The backslash goes first: the
    # escapes written after it are backslashes followed by ASCII letters and digits,
    # which no later replace touches, so this equals one simultaneous substitution.
    for raw, escaped in _ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def unescape_line(line: str) -> str:
    """Invert :func:`escape_line`: ``unescape_line(escape_line(t)) == t`` for every str."""
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPES[m.group()], line)


def cut(text: str, limit: int) -> str:
    """``text`` if it is at most ``limit`` code points long, else its first ``limit`` code
    points followed by :data:`ELLIPSIS`.

    Python strings index by code point, so a cut never splits one (a combining sequence
    such as ``e`` + U+0301 can be split between its two code points).

    Runtime complexity: O(limit).
    """
    if len(text) <= limit:
        return text
    return text[:limit] + ELLIPSIS
