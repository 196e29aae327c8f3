"""The store path's compiled helpers (``_cwordoverlap.c``, its "store path" block)
against their references.

* ``ccore.add_text_known`` (no token set when every token is known, ``add_text``'s
  way at the first new one) leaves exactly the structures ``add_text`` and the Python
  path ``_add_tokens`` leave: the posting lists, and the vocabulary's ids, gram lists
  and 1/2-character index (tests/test_tokcache.py's Hypothesis test drives all of the
  compiled adds and Python with the same texts, using this module's strategy); bad
  arguments are refused before C, and the C code refuses what would break memory
  safety.
* ``textfold.fold`` (``fold_ascii`` in C for an ASCII text) equals
  ``" ".join(text.casefold().split())`` and ``fold_python`` on any text.
"""

from __future__ import annotations

import string
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels, textfold
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore

from .strategies import examples

needs_core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

TOKENS = ["a", "ab", "abc", "deploy", "deployed", "é", "straße", "İx", '{"k":1}', "x1", "x2"]
SPACE = [" ", "  ", "\t", "\n", "\x1c", "\u2003", " \r\n "]


@st.composite
def texts(draw: Any) -> str:
    words = draw(st.lists(st.sampled_from(TOKENS) | st.text("xyzé", min_size=1, max_size=3)))
    seps = draw(st.lists(st.sampled_from(SPACE), min_size=len(words) + 1, max_size=len(words) + 1))
    out = seps[0]
    for w, s in zip(words, seps[1:], strict=True):
        out += w + s
    return out


def _structures(post: dict[str, array[int]], vocab: SubstringVocab) -> tuple[Any, ...]:
    return (
        {tok: list(lst) for tok, lst in post.items()},
        vocab._ids,
        vocab._items,
        vocab._refs,
        vocab._next_id,
        vocab._grams,
        vocab._sub,
    )


@needs_core
@needs_core
def test_add_text_known_shortcut_and_fallback() -> None:
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}
    assert ccore.add_text_known(post, "a b a", 0, vocab) == 2  # all new: add_text's way
    assert ccore.add_text_known(post, "b  a\tb", 1, vocab) == 0  # all known: the shortcut
    assert post == {"a": array("i", [0, 1]), "b": array("i", [0, 1])}
    assert ccore.add_text_known(post, "a b new a", 2, vocab) == 1  # known ones, then a new
    assert post == {"a": array("i", [0, 1, 2]), "b": array("i", [0, 1, 2]), "new": array("i", [2])}
    assert ccore.add_text_known(post, "", 3, vocab) == 0  # no token: nothing to append
    many = " ".join(["a", "b"] * 100)  # more tokens than the stack buffers hold
    assert ccore.add_text_known(post, many, 4, vocab) == 0
    assert ccore.add_text_known(post, many + " new2", 5, vocab) == 1
    assert post["a"] == post["b"] == array("i", [0, 1, 2, 4, 5])
    assert vocab._ids.keys() == {"a", "b", "new", "new2"}


@needs_core
@pytest.mark.parametrize("add", [ccore.add_text, ccore.add_text_known])
def test_adds_refuse_bad_arguments_before_c(add: Any) -> None:
    vocab = SubstringVocab()
    with pytest.raises(TypeError):
        add([], "a b", 0, vocab)
    with pytest.raises(TypeError):
        add({}, b"a b", 0, vocab)
    with pytest.raises(TypeError):
        add({}, "a b", 0, object())
    with pytest.raises(ValueError, match="gid"):
        add({}, "a b", -1, vocab)
    with pytest.raises(ValueError, match="gid"):
        add({}, "a b", 1 << 31, vocab)


@needs_core
def test_c_store_path_checks_memory_safety_itself() -> None:
    from actormem._index import _cwordoverlap as c

    vocab = SubstringVocab()
    with pytest.raises(TypeError, match="array"):
        c.add_text_known({"a": [1]}, "a", 2, vocab)
    with pytest.raises(ValueError, match="gid"):
        c.add_text_known({}, "a", -1, vocab)
    with pytest.raises(TypeError):
        c.add_text_known([], "a", 1, vocab)
    with pytest.raises(TypeError, match="str"):
        c.fold_ascii(b"abc")


ASCII = st.text(st.sampled_from(string.printable + "\x00\x1c\x1d\x1e\x1f\x7f\x0b\x0c"))


@settings(max_examples=examples(500), deadline=None)
@given(ASCII | st.text())
def test_fold_is_casefold_split_join(text: str) -> None:
    want = " ".join(text.casefold().split())
    assert textfold.fold_python(text) == want
    assert textfold.fold(text) == want


@needs_core
def test_fold_ascii_in_c() -> None:
    from actormem._index import _cwordoverlap as c

    assert c.fold_ascii("é x") is None  # non-ASCII: folded in Python
    done = "already folded, text."
    assert c.fold_ascii(done) is done  # nothing to change: the text itself
    assert c.fold_ascii(" Two\t\tWORDS\x1f") == "two words"
    assert c.fold_ascii("") == ""
    assert c.fold_ascii(" \n ") == ""
