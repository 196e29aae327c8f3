"""The duplicate key by the fold's hash (``textfold.fold_hash``, ``fold_hash`` in
``_cwordoverlap.c``): equal to its Python reference on any text, equal for texts whose
folds are equal (case, whitespace, Unicode case folding), and a state keyed by it groups
exactly as a state keyed by the fold itself (the path before it).
"""

from __future__ import annotations

import string
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState, _dupkey, _dupkey_hashed
from actormem._index import kernels, textfold

from .strategies import examples

needs_core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)
TEXTS = st.text(st.sampled_from(string.printable + "\x1c\x85\xa0\u2003ßẞKkſİı")) | st.text()


@needs_core
@settings(max_examples=examples(500), deadline=None)
@given(TEXTS)
def test_fold_hash_is_its_reference(text: str) -> None:
    from actormem._index import _cwordoverlap as c

    want = textfold.fold_hash_python(text)
    assert c.fold_hash(text) == want
    assert textfold.fold_hash(text) == want
    assert 0 <= want < 1 << 62


@needs_core
@settings(max_examples=examples(300), deadline=None)
@given(TEXTS, TEXTS)
def test_equal_folds_hash_equal(a: str, b: str) -> None:
    for x, y in ((a, b), (a, a.upper()), (a, " \t".join(a.split())), (a, a.casefold())):
        if textfold.fold(x) == textfold.fold(y):
            assert textfold.fold_hash(x) == textfold.fold_hash(y)


def test_examples() -> None:
    h = textfold.fold_hash
    assert h("Straße  IS\tbig") == h("strasse is big") == h("STRASSE IS BIG ")
    assert h("\u212aelvin") == h("kelvin")  # the Kelvin sign folds to k
    assert h("") == h(" \n ")
    assert h("a b") != h("ab")
    assert h(str.__new__(type("S", (str,), {}), "A b")) == h("a b")  # a str subclass


@needs_core
def test_c_refuses_a_non_str() -> None:
    from actormem._index import _cwordoverlap as c

    with pytest.raises(TypeError, match="str"):
        c.fold_hash(b"abc")


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.sampled_from(["A b", "a  B", "Straße", "STRASSE", "x", "X\t"]), max_size=12))
def test_states_keyed_either_way_group_alike(texts: list[str]) -> None:
    states = {}
    saved = textfold._FOLD_HASH
    try:
        for on in (False, True):
            textfold._FOLD_HASH = on
            states[on] = MemoryState(capacity=None, half_life=60.0, scorer=WordOverlapScorer())
    finally:
        textfold._FOLD_HASH = saved
    assert states[False]._dupkey is _dupkey
    if textfold._fold_hash_c is not None:
        assert states[True]._dupkey is _dupkey_hashed
    for i, text in enumerate(texts):
        entry = MemoryEntry(category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=i + 1))
        for state in states.values():
            state.store(entry)
    groups = {}
    for on, state in states.items():
        state.publish()
        state._check()
        groups[on] = sorted(sorted(r.seq for r in state._dup_group(k)) for k in state._dup_keys)
        state.consolidate()
        state.publish()
    assert groups[True] == groups[False]
    assert [r.entry.id for r in states[True].view().records()] == [
        r.entry.id for r in states[False].view().records()
    ]
