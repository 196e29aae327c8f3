"""``View.by_key`` at a version from before another id took the key (review revB).

``_by_key`` maps a key to the id that took it last; a view older than that store must
still find the record that held the key at its version: the previous holder. A durable
memory's ``get_by_key`` reads the published view while the owner's batch (applied, not
yet published: the group commit is being written) has moved the key, so it answered
None for a key that its snapshot holds.
"""

from __future__ import annotations

import random
import uuid

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._engine.state import MemoryState, View
from actormem._index.bm25 import BM25Scorer
from actormem._index.wordoverlap import WordOverlapScorer


def _e(text: str, ident: uuid.UUID, key: str | None) -> MemoryEntry:
    return MemoryEntry(category=MemoryCategory.FACT, memory=text, id=ident, key=key)


@pytest.mark.parametrize("move", ["delete", "rekey", "evict"])
def test_an_older_view_finds_the_keys_holder_at_its_version(move: str) -> None:
    st = MemoryState(
        capacity=1 if move == "evict" else None, half_life=86400.0, scorer=WordOverlapScorer()
    )
    a, b = uuid.uuid4(), uuid.uuid4()
    st.store(_e("alpha", a, "k"))
    st.publish()
    view = st.view()
    if move == "delete":
        st.delete(a)
    elif move == "rekey":
        st.store(_e("alpha two", a, "j"))
    st.store(_e("beta", b, "k"))  # (evict: the full memory evicts alpha first)
    rec = view.by_key((), "k")  # the published view: the owner has not published
    assert rec is not None
    assert rec.entry.memory == "alpha"
    st.publish()
    now = st.view().by_key((), "k")
    assert now is not None
    assert now.entry.memory == "beta"
    st.vacuum(view.version)
    st._check()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scorer", [WordOverlapScorer, BM25Scorer])
def test_views_by_key_agree_with_what_they_saw(seed: int, scorer: type) -> None:
    """Random keyed stores, deletes, re-keys and purges under held views: each view's
    ``by_key`` answers what it answered when it was taken, and the chains of previous
    holders empty once no view needs them."""
    rng = random.Random(seed)
    st = MemoryState(capacity=None, half_life=86400.0, scorer=scorer())
    ids = [uuid.uuid4() for _ in range(6)]
    keys = ["k1", "k2", "k3", None]
    held: list[tuple[int, dict[str, str | None]]] = []
    for i in range(1500):
        op = rng.random()
        if op < 0.6:
            st.store(_e(f"text {i}", rng.choice(ids), rng.choice(keys)))
        elif op < 0.8:
            st.delete(rng.choice(ids))
        if rng.random() < 0.5:
            st.publish()
        if rng.random() < 0.1:
            v = st.view()
            seen = {}
            for k in keys[:3]:
                r = v.by_key((), k)  # type: ignore[arg-type]
                seen[k] = None if r is None else r.entry.memory  # type: ignore[index]
            held.append((v.version, seen))
        if held and rng.random() < 0.1:
            held.pop(rng.randrange(len(held)))
        if rng.random() < 0.3:
            st.publish()
            st.vacuum(min([h[0] for h in held], default=st.published), budget=rng.choice([None, 2]))
        for version, seen in held:
            view = View(st, version, 0)
            for k, want in seen.items():
                r = view.by_key((), k)
                assert (None if r is None else r.entry.memory) == want, (i, version, k)
    st.publish()
    st.vacuum(st.published)
    st._check()
    assert not st._key_prev


def test_get_by_key_during_a_group_commit(tmp_path: object) -> None:
    """A durable memory publishes a batch once its commit is written: meanwhile
    ``get_by_key`` reads the version before it, where the key is the old holder's."""
    import trio

    from actormem import open_memory

    a, b = uuid.uuid4(), uuid.uuid4()

    async def main() -> None:
        async with open_memory(path=str(tmp_path) + "/m.db") as memory:  # type: ignore[operator]
            await memory.store(_e("alpha", a, "k"))
            commit = memory._commit
            assert commit is not None
            started, release = trio.Event(), trio.Event()

            async def slow_commit(*args: object) -> None:
                started.set()
                await release.wait()
                await commit(*args)

            memory._commit = slow_commit
            async with trio.open_nursery() as nursery:
                nursery.start_soon(memory.store_many, [_e("alpha two", a, "j"), _e("beta", b, "k")])
                await started.wait()
                got = await memory.get_by_key((), "k")
                assert got is not None
                assert got.memory == "alpha"
                release.set()
            memory._commit = commit
            got = await memory.get_by_key((), "k")
            assert got is not None
            assert got.memory == "beta"

    trio.run(main)
