"""Review 17b: the C paths of the store path part 8, open part 4 and the visit selection
against their Python references over wider inputs (surrogates, every string kind, JSON
values, hashes that raise, ties), and the gc pause's thread count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import JsonObject
from actormem._engine import state as state_module
from actormem._index import imagehash as _hash
from actormem._index import kernels, persist, textfold
from actormem._index.wordoverlap import ccore

from .strategies import examples

wo = kernels.wo_core()
pytestmark = pytest.mark.skipif(wo is None, reason="the C core is not built")

# Every code point, surrogates included (st.text() leaves them out), mixed with the
# cases that matter (sigma, İ, Kelvin, whitespace of each kind).
every_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)
special = st.sampled_from(
    list("AZaz@[`{ \t\n\x0b\x1c\x1f\x85\xa0ΣσςİIßẞǅ\u1680\u2028\u3000\u212a\ud800\udc00😀")
)
wide_texts = st.text(st.one_of(every_char, special), max_size=24)


@settings(max_examples=examples(400), deadline=None)
@given(wide_texts)
def test_lower_text_is_str_lower_with_surrogates(text: str) -> None:
    got = wo.lower_text(text)
    assert got == text.lower()
    assert type(got) is str


@settings(max_examples=examples(400), deadline=None)
@given(wide_texts)
def test_fold_hash_table_is_direct_and_python(text: str) -> None:
    want = textfold.fold_hash_python(text)
    assert wo.fold_hash_table(text) == want
    assert wo.fold_hash_direct(text) == want
    assert wo.fold_hash(text) == want


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)  # JsonObject refuses both
    | st.text(max_size=3),
    lambda inner: st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
).map(lambda v: JsonObject(v) if isinstance(v, dict) else None)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.text(max_size=3), max_size=2).map(tuple),
    st.sampled_from(["fact", "episode", "preference"]),
    wide_texts,
    st.none() | st.text(max_size=4),
    json_values,
)
def test_dup_key_is_the_formula_for_json_values(
    ns: tuple[str, ...], cat: str, text: str, key: str | None, value: Any
) -> None:
    want = state_module._dup_key(ns, cat, textfold.fold_hash(text), key, value)
    assert wo.dup_key(ns, cat, text, key, value) == want


def test_dup_key_passes_on_what_a_hash_raises() -> None:
    class Boom:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def __hash__(self) -> int:
            raise self.exc

    for exc in (ValueError("x"), KeyboardInterrupt(), MemoryError()):
        with pytest.raises(type(exc)):
            wo.dup_key((), "fact", "x", None, Boom(exc))
        with pytest.raises(type(exc)):
            state_module._dup_key((), "fact", 1, None, Boom(exc))

    class MinusOne:  # hash() of -1 is -2 for both
        def __hash__(self) -> int:
            return -1

    v = MinusOne()
    want = state_module._dup_key((), "fact", textfold.fold_hash("x"), None, v)
    assert wo.dup_key((), "fact", "x", None, v) == want


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, -0.0]), st.integers(0, 6)), max_size=50),
    st.integers(0, 60),
)
def test_visit_select_is_the_sorted_order(pairs: list[tuple[float, int]], k: int) -> None:
    n = len(pairs)
    maxrel = np.array([b for b, _ in pairs] or [0.0], np.float64)
    minseq = np.array([s for _, s in pairs] or [0], np.int64)
    idx = np.arange(n, dtype=np.int64)
    heap = np.zeros(4 * n + 4, np.int64)
    m = ccore.visit_heap(idx, maxrel, minseq, 0.0, None, None, heap, False)
    assert m == n
    got, left = ccore.visit_select(heap, m, k)
    want = sorted((((0.5 * b + 0.0) + 0.0) + 0.1, s) for b, s in pairs)
    want.sort(key=lambda t: (-t[0], t[1]))
    assert [(b, s) for _, b, s, _ in got] == want[: min(k, n)]
    assert left == n - len(got)
    ccore.visit_order(heap, left)
    rest, left2 = ccore.visit_pop(heap, left, n + 1)
    assert left2 == 0
    assert [(b, s) for _, b, s, _ in rest] == want[len(got) :]
    assert sorted(g for g, *_ in got + rest) == list(range(n))


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(wide_texts, max_size=6), st.integers(0, 3))
def test_feed_digest_with_surrogates(texts: list[str], big: int) -> None:
    # A text of ~1 MiB puts a run's boundary inside the texts that follow it.
    texts = ["a" * ((1 << 20) - big)] * (big > 0) + texts
    on = persist.text_digest(texts, ["ü", "\ud800"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_encoder", lambda: False)  # str.join and encode
        off = persist.text_digest(texts, ["ü", "\ud800"])
    assert on == off
    h = _hash.new128()
    persist._feed(h.update, texts, ["ü", "\ud800"])  # the core's runs
    assert h.hexdigest() == on
    for part in (texts, ["ü", "\ud800"]):  # _feed: the core's runs, then the join's
        assert _fed_bytes(part, True) == _fed_bytes(part, False)


def _fed_bytes(part: list[str], encoder: bool) -> bytes:
    """What ``persist._feed`` gives ``update`` for ``part`` (``extra`` empty), with the
    core's encoder or without it (``str.join`` and ``encode``)."""
    out: list[bytes] = []
    with pytest.MonkeyPatch.context() as mp:
        if not encoder:
            mp.setattr(persist, "_encoder", lambda: False)
        persist._feed(lambda b: out.append(bytes(b)), part, ())  # views: copied
    return b"".join(out)
