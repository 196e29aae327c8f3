"""Branch store8's store path (issue #20's store target), each against the path before it.

* ``knobs._SCAN_ONE`` (``ccore.add_text_cached``/``add_texts_cached``, flag 16): an
  ASCII or narrowed text's tokens found in one pass leave exactly the posting dict (its
  insertion order too), the vocabulary (every order a reader sees) and the new tokens'
  counts of the three-pass scan, for texts of every kind, ``str.split``'s ASCII
  whitespace (``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1f``) and more than 64 tokens (the
  token list grown), cut into any batches; and agree with ``set(low.split())``;
* ``textfold._FOLD_TABLE`` (``fold_hash_table``): ``fold_hash_direct``'s and the Python
  reference's value on any text, every ASCII byte in every string kind;
* ``state._DUPKEY_C`` (the C ``dup_key``): the one formula ``state._dup_key`` of the
  fold hash, on any fields; its refusals;
* ``knobs._LEAN_TEXT_CHECKS``: a text that is not a ``str`` is refused (TypeError) with
  nothing added and no mask written, either way;
* ``knobs._MASKS_BY_KIND``: ``text_masks`` gives the same masks, and numpy's;
* ``knobs._LOWER_C`` (the core's ``lower_text``): ``str.lower``'s value on any text
  (the capital sigma's context too), a new exact ``str``; its refusals;
* all of them on one state, off on another, through ``test_store_batch``'s state
  machine (structures, journal, removals, errors and top-k with scores after every
  step), and the bulk load's duplicate groups.
"""

from __future__ import annotations

import uuid
from array import array
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels, textfold
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore, masks
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples, run_machine
from .test_store6 import assert_knob_adds_alike
from .test_store_batch import BASE, TwoPaths, _snapshot

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

_WORDS = ["it", "is", "Don", "t", "abc", "ab", "café", "don’t", "’", "x😀", "a" * 9, "b" * 17]
#: Every whitespace of ``str.split`` among ASCII bytes, and some that are not ASCII.
_SPACES = [" ", "  ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f"]
_SPACES_UCS = ["\x85", "\xa0", "\u2003", "\u3000"]


@st.composite
def _text(draw: Any) -> str:
    words = draw(
        st.lists(
            st.sampled_from(_WORDS) | st.text("ab’é\x00\x7f", min_size=1, max_size=4),
            max_size=draw(st.sampled_from([8, 8, 90])),  # 90: past the 64 refs on the stack
        )
    )
    spaces = st.sampled_from(_SPACES + _SPACES_UCS if draw(st.booleans()) else _SPACES)
    seps = draw(st.lists(spaces, min_size=len(words) + 1, max_size=len(words) + 1))
    out = seps[0]
    for w, s in zip(words, seps[1:], strict=True):
        out += w + s
    return out


@core
@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(_text(), max_size=10),
    st.lists(st.integers(1, 4), max_size=5),
    st.lists(st.sampled_from(_WORDS), max_size=6),
)
def test_scan_one_leaves_the_same_structures(
    texts: list[str], cuts: list[int], seed: list[str]
) -> None:
    assert_knob_adds_alike([t.lower() for t in texts], cuts, seed, "_SCAN_ONE")


_TABLE = textfold._fold_hash_table
needs_table = pytest.mark.skipif(_TABLE is None, reason="the core is not built")


@needs_table
@settings(max_examples=examples(300), deadline=None)
@given(st.text() | st.text("aBZz@[`{ ß İΣσς\u00a0\u2003\x1c\x1f\x0b\t\n😀", max_size=30))
def test_fold_hash_table_is_fold_hash(text: str) -> None:
    assert _TABLE is not None
    assert textfold._fold_hash_direct is not None
    assert _TABLE(text) == textfold._fold_hash_direct(text) == textfold.fold_hash_python(text)


@needs_table
def test_fold_hash_table_every_ascii_byte_in_every_kind() -> None:
    assert _TABLE is not None
    for c in map(chr, range(128)):
        for prefix in ("", "é", "’", "😀"):  # ASCII, Latin-1, UCS-2, UCS-4 strings
            for text in (c, f"{prefix}{c}", f"a{c}B{prefix}", f" {c} {c}{c} ", f"{c}{prefix}x"):
                assert _TABLE(text) == textfold.fold_hash_python(text), repr(text)
    with pytest.raises(TypeError):
        _TABLE(b"x")  # type: ignore[arg-type]


_DUP = textfold._dup_key_c
needs_dup = pytest.mark.skipif(_DUP is None, reason="the core is not built")


@needs_dup
@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.text(max_size=3), max_size=2).map(tuple),
    st.sampled_from(["fact", "episode", "x"]),
    st.text() | st.text("aB é’\t\n", max_size=12),
    st.none() | st.text(max_size=4),
    st.none() | st.integers() | st.text(max_size=3),
)
def test_dup_key_is_the_formula(
    ns: tuple[str, ...], cat: str, text: str, key: str | None, value: Any
) -> None:
    assert _DUP is not None
    want = state_module._dup_key(ns, cat, textfold.fold_hash_python(text), key, value)
    assert _DUP(ns, cat, text, key, value) == want
    assert 0 <= want < 1 << 30


@needs_dup
def test_dup_key_refusals() -> None:
    assert _DUP is not None

    class Sub(str):
        pass

    with pytest.raises(TypeError):
        _DUP((), "fact", b"x", None, None)
    with pytest.raises(TypeError):
        _DUP((), "fact", Sub("x"), None, None)
    with pytest.raises(TypeError):
        _DUP((), "fact", "x", None)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _DUP((), "fact", "x", None, [1])  # unhashable


@core
@pytest.mark.parametrize("lean", [True, False])
def test_a_text_that_is_not_a_str_is_refused(lean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_LEAN_TEXT_CHECKS", lean)
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    with pytest.raises(TypeError, match="str"):
        ccore.add_texts_cached(post, ["alpha", b"beta"], 0, vocab, ccore.token_cache(), 0)  # type: ignore[list-item]
    assert post == {}
    assert len(vocab) == 0
    out = (np.zeros(4, np.uint64), np.zeros(4, np.uint64))
    with pytest.raises(TypeError, match="str"):
        ccore.text_masks(["alpha", 1], out, 0)  # type: ignore[list-item]
    assert out[0].tolist() == out[1].tolist() == [0, 0, 0, 0]


@core
@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_text() | st.text(max_size=20), max_size=6))
def test_text_masks_by_kind(texts: list[str]) -> None:
    lows = [t.lower() for t in texts]
    got = []
    for on in (True, False):
        out = (np.zeros(len(lows) + 1, np.uint64), np.zeros(len(lows) + 1, np.uint64))
        wo_knobs._MASKS_BY_KIND = on
        try:
            ccore.text_masks(lows, out, 1)
        finally:
            wo_knobs._MASKS_BY_KIND = True
        got.append((out[0].tolist(), out[1].tolist()))
    assert got[0] == got[1]
    if lows:
        lo, hi = masks._text_masks(lows)
        assert got[0][0][1:] == lo.tolist()
        assert got[0][1][1:] == hi.tolist()


_LOWER = getattr(kernels.wo_core(), "lower_text", None)


@pytest.mark.skipif(_LOWER is None, reason="the core is not built")
@settings(max_examples=examples(300), deadline=None)
@given(st.text() | st.text("AbZ@[ ÀÉßİΣσςǅẞＡ’😀\u0130\u1e9e", max_size=30))
def test_lower_text_is_str_lower(text: str) -> None:
    assert _LOWER is not None
    got = _LOWER(text)
    assert got == text.lower()
    assert type(got) is str


@pytest.mark.skipif(_LOWER is None, reason="the core is not built")
def test_lower_text_every_code_point_and_refusals() -> None:
    assert _LOWER is not None
    for c in range(0, 0x110000, 7):  # every 7th code point, each among others
        text = f"A{chr(c)}é"
        assert _LOWER(text) == text.lower(), hex(c)
    for text in ("ΑΣ", "ΑΣ Σ", "aΣb", "Σ"):  # the capital sigma: str.lower's context
        assert _LOWER(text) == text.lower()

    class Sub(str):
        pass

    for bad in (b"x", Sub("x"), None):
        with pytest.raises(TypeError):
            _LOWER(bad)
    assert ccore.lower() is _LOWER
    wo_knobs._LOWER_C = False
    try:
        assert ccore.lower() is str.lower
    finally:
        wo_knobs._LOWER_C = True


_KNOBS = [
    (wo_knobs, "_LOWER_C"),
    (wo_knobs, "_SCAN_ONE"),
    (wo_knobs, "_LEAN_TEXT_CHECKS"),
    (wo_knobs, "_MASKS_BY_KIND"),
    (textfold, "_FOLD_TABLE"),
    (state_module, "_DUPKEY_C"),
]


def _set_knobs(on: bool) -> None:
    for module, name in _KNOBS:
        setattr(module, name, on)


class TwoPathsStore8(TwoPaths):
    """test_store_batch's two states on the batched path, one with this branch's knobs
    on, one with them off."""

    def _side(self, on: bool) -> None:
        _set_knobs(on)


@core
def test_store8_states_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoPathsStore8, 12, 20)


@core
def test_bulk_load_keys_agree() -> None:
    texts = ["Deploy  the blue", "deploy the BLUE", "café ’x", "CAFÉ ’x", "plain", "plain"]
    rows = [
        (
            i + 1,
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=t,
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
                key="k" if i == 5 else None,
            ),
        )
        for i, t in enumerate(texts)
    ]
    seen = []
    for on in (True, False):
        _set_knobs(on)
        try:
            s = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            s.load(rows)
            seen.append(_snapshot(s))
            s._check()
        finally:
            _set_knobs(True)
    assert seen[0] == seen[1]
    assert len(seen[0][6]) == 2  # the two duplicate groups (the last "plain" has a key)
