"""The posting lists by token id (knobs._LISTS_BY_ID): ``ccore.lists_of_ids`` against
the dict path it replaces, the owner's slots against its dicts after stores, deletes,
purges (lists replaced and deleted) and renumberings, and retrieves read a step at a
time under those writes against the path without the slots on the same snapshot."""

from __future__ import annotations

from array import array
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from . import readers_under_writes
from .strategies import examples

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)
# Words with many tokens containing them (play: player, display, ...), and rarer ones.
WORDS = (
    "play player display playful replay playing plays deploy redeploy deploys service "
    "services error errors catalog dogma"
).split()
CHANCES = [0.5, 0.4, 0.3, 0.2, 0.2, 0.1, 0.3, 0.8, 0.2, 0.3, 0.6, 0.2, 0.4, 0.1, 0.1, 0.1]
QUERIES = ["play", "play error", "lay deploy", "display serv", "pla ogma", "deploy play ser"]


def reference(
    ids: list[int], start: int, stop: int, items: dict[int, str], post: dict[str, Any]
) -> list[Any]:
    """The path before ``lists_of_ids``: matchsets' map and filter over the dicts."""
    toks = filter(None, map(items.get, ids[start:stop]))
    return list(filter(None, map(post.get, toks)))


@settings(max_examples=examples(150), deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    gone=st.sets(st.integers(0, 11)),
    empty_item=st.integers(0, 11),
    slots=st.lists(st.sampled_from(["list", "none"]), max_size=14),
    ids=st.lists(st.integers(-2, 14), max_size=20),
    start=st.integers(-3, 22),
    stop=st.integers(-3, 25),
    ahead=st.sampled_from([0, 1, 3, 16, 40]),
)
def test_lists_of_ids_as_the_dicts(
    sizes: list[int],
    gone: set[int],
    empty_item: int,
    slots: list[str],
    ids: list[int],
    start: int,
    stop: int,
    ahead: int,
) -> None:
    items = {i: f"t{i}" for i in range(len(sizes)) if i not in gone}
    if empty_item in items:
        items[empty_item] = ""  # skipped like filter(None, ...)
    post: dict[str, Any] = {f"t{i}": array("i", range(size)) for i, size in enumerate(sizes)}
    post[""] = array("i", [1])
    # The owner's slots: the dicts' list, or None (looked up in the dicts); an id beyond
    # them too. A slot is never a list the dicts' path does not give (no token is empty).
    byid: list[Any] = []
    for i, kind in enumerate(slots):
        found = post.get(items[i]) if items.get(i) else None
        byid.append(found if kind == "list" and i < len(sizes) else None)
    lists: list[Any] = [array("i", [7])]  # appended to, not replaced
    lens: list[int] = [1]
    saved = wo_knobs._PREFETCH
    wo_knobs._PREFETCH = ahead  # prefetching ahead reads nothing it does not use
    try:
        total = ccore.lists_of_ids(ids, start, stop, byid, items, post, lists, lens)
    finally:
        wo_knobs._PREFETCH = saved
    want = reference(ids, max(0, start), max(0, stop), items, post)  # no negative index
    assert lists[1:] == want
    assert all(a is b for a, b in zip(lists[1:], want, strict=True))
    assert lens[1:] == [len(x) for x in want]
    assert total == sum(lens[1:])
    assert lists[0] == array("i", [7])
    assert lens[0] == 1


@settings(max_examples=examples(150), deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(-3, 200), max_size=40), max_size=30),
    n=st.integers(0, 190),
    ahead=st.sampled_from([1, 2, 5, 16, 99]),
)
def test_bits_join_ahead_as_without(lists: list[list[int]], n: int, ahead: int) -> None:
    arrays = [array("i", lst) for lst in lists]
    got = {}
    for k in (0, ahead):
        bits = np.zeros(ccore.words_of(n) + 1, np.uint64)
        saved = wo_knobs._PREFETCH
        wo_knobs._PREFETCH = k
        try:
            ccore.bits_join(arrays, n, bits)
        finally:
            wo_knobs._PREFETCH = saved
        got[k] = bits
    want = np.zeros(ccore.words_of(n) + 1, np.uint64)
    for g in {g for lst in lists for g in lst if 0 <= g < n}:
        want[g >> 6] |= np.uint64(1) << np.uint64(g & 63)
    assert np.array_equal(got[0], want)
    assert np.array_equal(got[ahead], want)
    for a in arrays:  # no buffer left held: each can grow
        a.append(0)


def test_bits_join_ahead_releases_on_a_bad_list() -> None:
    good = [array("i", [1, 2]) for _ in range(5)]
    bits = np.zeros(1, np.uint64)
    saved = wo_knobs._PREFETCH
    wo_knobs._PREFETCH = 4
    try:
        with pytest.raises((TypeError, ValueError)):
            ccore.bits_join([*good, array("q", [1])], 64, bits)
        with pytest.raises((TypeError, ValueError)):  # past the wrapper's check, into C
            ccore._module().bits_join([*good, array("q", [1]), *good], 64, bits, 4)
    finally:
        wo_knobs._PREFETCH = saved
    for a in good:  # every buffer taken was released
        a.append(3)


def test_lists_of_ids_refuses_bad_arguments() -> None:
    lst = array("i", [1, 2])
    items, post = {0: "a"}, {"a": lst}
    good: list[Any] = [[0], 0, 1, [lst], items, post, [], []]
    assert ccore.lists_of_ids(*good) == 2
    for k, bad in [
        (0, (0,)),
        (1, 0.0),
        (2, None),
        (3, (lst,)),
        (4, [0]),
        (5, None),
        (6, ()),
        (7, None),
    ]:
        args = [*good[:6], [], []]
        args[k] = bad
        with pytest.raises((TypeError, ValueError)):
            ccore.lists_of_ids(*args)
    ids = [0]
    for args in (
        [ids, 0, 1, [lst], items, post, ids, []],  # lists is ids
        [[0], 0, 1, [lst], items, post, [], None],
    ):
        with pytest.raises((TypeError, ValueError)):
            ccore.lists_of_ids(*args)
    assert ids == [0]
    lists: list[Any] = []
    lens: list[int] = []
    for args, error in (
        ([[0], 0, 1, [[1, 2]], items, post, lists, lens], TypeError),  # not an array
        ([[0], 0, 1, [], {0: 5}, post, lists, lens], TypeError),  # an item not a str
        ([[0], 0, 1, [], items, {"a": [1]}, lists, lens], TypeError),
    ):
        with pytest.raises(error):
            ccore.lists_of_ids(*args)
    assert lists == []
    assert lens == []


def _check_slots(state: MemoryState) -> int:
    """Every slot of the owner's ``byid`` is its dicts' list (or None); returns the
    slots that hold a list."""
    index: Any = state.index
    e, vocab = index._e, index._vocab
    held = 0
    for i, lst in enumerate(e.byid):
        if lst is not None:
            held += 1
            assert lst is e.post.get(vocab.items.get(i)), i
    assert len(e.byid) <= vocab.id_limit
    return held


@pytest.mark.parametrize("seed", range(8))
def test_readers_through_the_slots_under_writes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 0)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 8)
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 1 + seed % 5)
    monkeypatch.setattr(wo_knobs, "_DENSE_BITS", 2 + seed % 3 * 30)  # dense or sparse sets
    monkeypatch.setattr(wo_knobs, "_JOIN", 4)
    monkeypatch.setattr(wo_knobs, "_JOIN_LISTS", 3)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS", 3 if seed % 2 else 0)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_FROM", 0)
    monkeypatch.setattr(wo_knobs, "_STEP", 2)
    monkeypatch.setattr(wo_knobs, "_LISTS_BY_ID", True)
    rng = np.random.default_rng(seed)
    state = readers_under_writes.unmemoized_state()
    entry = readers_under_writes.entry_maker(rng, WORDS, CHANCES, lambda n: f"m{n % 13}x{n % 7}")
    off = readers_under_writes.path_with(monkeypatch, state, "_LISTS_BY_ID", False)
    held = 0

    def slots() -> None:
        nonlocal held
        held = max(held, _check_slots(state))

    assert readers_under_writes.run(state, entry, QUERIES, rng, off, slots)  # retrieves finished
    assert held  # slots were read
