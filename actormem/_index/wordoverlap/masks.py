"""Short query words answered from a 128-bit mask per text instead of the vocabulary.

A one- or two-character query word (``a``, ``on``, ``-``) is a substring of most texts:
its union of posting lists is the largest of all. Each text gets one bit per word of
:data:`_SHORT` it contains, computed vectorised from its character pairs, so the match
set of such a word is one vectorised AND over the masks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Short query words answered from a bit mask per group (``_Numbering.masks``): 64
#: characters, then 64 two-character words. Their posting unions are the largest (a
#: one-letter word is in most texts), so this turns the costliest first lookups into
#: one vectorised AND. Any other word goes through the vocabulary.
_SHORT: tuple[str, ...] = (
    *"abcdefghijklmnopqrstuvwxyz0123456789-.,'\":;!?()/_=+&$%#@*[]<>|{}",
    *"on in is at to of do my he me we it an as be by go if no or so up us am oh ok hi".split(),
    *(str(i) for i in range(10, 32)),
    *"mr ms dr tv pm vs uk la ny dc ai id na ah ha".split(),
)
assert len(_SHORT) == 128 == len(set(_SHORT)), len(_SHORT)
_SHORT_BIT = {w: i for i, w in enumerate(_SHORT)}
# ccore.count_words skips this dict for the words of 3 or more characters.
assert all(1 <= len(w) <= 2 for w in _SHORT_BIT), "short words have 1-2 characters"


def _pair_table() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The mask bits (low and high 64) of a character pair ``(a, b)`` at ``a * 129 + b``
    (code points above 127 as 128): those of the :data:`_SHORT` character ``a`` and of
    the :data:`_SHORT` 2-character word ``ab``."""
    lo = np.zeros(129 * 129, np.uint64)
    hi = np.zeros(129 * 129, np.uint64)
    for w, bit in _SHORT_BIT.items():
        half = lo if bit < 64 else hi
        value = np.uint64(1 << (bit & 63))
        if len(w) == 1:
            half[ord(w) * 129 : ord(w) * 129 + 129] |= value
        else:
            half[ord(w[0]) * 129 + ord(w[1])] |= value
    return lo, hi


_PAIR_LO, _PAIR_HI = _pair_table()


def _short_mask(token: str) -> int:
    """The 128-bit mask of the :data:`_SHORT` words ``token`` contains: the reference
    for :func:`_text_masks`. O(len(token))."""
    return sum(1 << bit for bit, w in enumerate(_SHORT) if w in token)


def _text_masks(
    texts: list[str],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The :func:`_short_mask` of each of ``texts`` (lower-cased) as a whole, the low
    and high 64 bits in two arrays, vectorised: a :data:`_SHORT` word has no whitespace,
    so the mask of a text is the union of its tokens' masks. Each text is followed by a
    newline, so every character (and that newline) starts a pair. O(total length) in
    numpy: about 3 us for a text of 240 characters in a batch of 128."""
    joined = "\n".join(texts) + "\n\n"
    codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
    codes = np.minimum(codes, 128)
    pairs = codes[:-1] * 129
    pairs += codes[1:]
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    lens += 1
    starts = np.cumsum(lens)
    starts -= lens
    return (
        np.bitwise_or.reduceat(_PAIR_LO[pairs], starts),
        np.bitwise_or.reduceat(_PAIR_HI[pairs], starts),
    )
