"""review26b: ActormemStore against LangGraph's semantics (a search refreshes the TTL of
the items it returns and no others; a nested filter object holding an operator)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytest.importorskip("langgraph.store.base")

from actormem.integrations.langgraph import ActormemStore  # noqa: E402


class Clock:
    """A settable wall clock (timezone-aware)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _embed(texts: list[str]) -> list[list[float]]:
    return [[1.0, float(len(t) % 7), 0.5] for t in texts]


def _expiries(store: ActormemStore) -> dict[str, datetime | None]:
    return {e.key: e.expires_at for e in store.memory.sync.list_entries(("n",), refresh_ttl=False)}


@pytest.mark.parametrize(
    "index", [None, {"dims": 3, "embed": _embed, "fields": ["text"]}], ids=["scorer", "embed"]
)
def test_a_ranked_search_refreshes_only_the_items_it_returns(index: object) -> None:
    clock = Clock()
    ttl = {"default_ttl": 10.0, "refresh_on_read": True}
    with ActormemStore(ttl=ttl, clock=clock, index=index) as store:  # type: ignore[arg-type]
        for i in range(5):
            store.put(("n",), f"k{i}", {"text": f"apple {'x' * i}"})
        before = _expiries(store)
        clock.now += timedelta(minutes=1)
        hits = store.search(("n",), query="apple", limit=1, offset=1)
        assert len(hits) == 1
        store.get(("n",), "nothing")  # let the owner apply the refreshes noted so far
        after = _expiries(store)
        refreshed = sorted(k for k in after if after[k] != before[k])
        # LangGraph's SQLite store refreshes the rows a search returns, no others: an
        # item skipped by `offset` or merely ranked must keep its expiry.
        assert refreshed == [hits[0].key]


def test_a_ranked_search_without_refresh_refreshes_nothing() -> None:
    clock = Clock()
    with ActormemStore(ttl={"default_ttl": 10.0, "refresh_on_read": True}, clock=clock) as store:
        for i in range(3):
            store.put(("n",), f"k{i}", {"text": "apple"})
        before = _expiries(store)
        clock.now += timedelta(minutes=1)
        assert len(store.search(("n",), query="apple", refresh_ttl=False)) == 3
        store.get(("n",), "nothing", refresh_ttl=False)
        assert _expiries(store) == before


def test_a_nested_filter_object_with_an_operator_matches_field_by_field() -> None:
    with ActormemStore() as store:
        for i in range(6):
            store.put(("f",), f"i{i}", {"nested": {"x": i, "y": "a"}, "n": i})

        def keys(f: dict[str, object]) -> list[str]:
            return sorted(i.key for i in store.search(("f",), filter=f, limit=100))

        # As LangGraph's InMemoryStore: the operator applies to nested.x.
        assert keys({"nested": {"x": {"$gt": 3}}}) == ["i4", "i5"]
        assert keys({"nested": {"x": {"$lte": 1}, "y": "a"}}) == ["i0", "i1"]
        assert keys({"nested": {"x": {"$gt": 3}}, "n": {"$ne": 5}}) == ["i4"]
        # Without operators: the fields named are there and equal (the engine's own).
        assert keys({"nested": {"x": 2, "y": "a"}}) == ["i2"]
        assert keys({"nested": {"x": 2}}) == ["i2"]
        assert keys({"nested": {"x": 2, "z": 1}}) == []
        # A bad path is still refused.
        with pytest.raises(ValueError, match="Invalid filter key"):
            keys({"a b": {"c": {"$gt": 1}}})


def test_a_dense_search_refreshes_only_the_items_it_returns() -> None:
    pytest.importorskip("wordllama")
    clock = Clock()
    ttl = {"default_ttl": 10.0, "refresh_on_read": True}
    index = {"fields": ["text"], "dims": 64}
    with ActormemStore(ttl=ttl, clock=clock, index=index) as store:  # type: ignore[arg-type]
        texts = ["the cat sat on the mat", "deploys go blue", "postgres", "kittens and cats"]
        for i, text in enumerate(texts):
            store.put(("n",), f"k{i}", {"text": text})
        store.put(("n",), "plain", {"text": "cats"}, index=False)
        before = _expiries(store)
        clock.now += timedelta(minutes=1)
        hits = store.search(("n",), query="cat", limit=2, offset=1)
        store.get(("n",), "nothing")
        after = _expiries(store)
        assert sorted(k for k in after if after[k] != before[k]) == sorted(h.key for h in hits)


def test_an_empty_index_list_embeds_nothing_as_in_langgraph() -> None:
    embedded: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return [[1.0, float(len(t))] for t in texts]

    with ActormemStore(index={"dims": 2, "embed": embed, "fields": ["text"]}) as store:
        store.put(("n",), "a", {"text": "aaaa"}, index=[])
        store.put(("n",), "b", {"text": "bb"})
        hits = store.search(("n",), query="aaaa")
        # LangGraph's stores embed no field for index=[]: the item has no vector, so it
        # comes after the ranked ones, without a score (as with index=False).
        assert [(h.key, h.score is None) for h in hits] == [("b", False), ("a", True)]
        assert "aaaa" not in embedded[:-1]  # the last text embedded is the query


def test_the_vectors_of_gone_items_are_not_kept_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import actormem.integrations.langgraph as lg

    monkeypatch.setattr(lg, "_PRUNE_MIN", 8, raising=False)
    index = {"dims": 2, "embed": lambda texts: [[1.0, float(len(t))] for t in texts]}
    with ActormemStore(capacity=5, index=index) as store:  # type: ignore[arg-type]
        for i in range(200):  # each put evicts one item once five are kept
            store.put(("n",), f"k{i}", {"text": "x" * (i % 9)})

        async def more() -> None:
            for i in range(200, 300):
                await store.aput(("n",), f"k{i}", {"text": "y"})

        asyncio.run(more())
        # The vectors of evicted items were dropped: at most twice the floor (8).
        assert len(store._vectors) <= 16
        store.delete(("n",), "k299")  # a delete drops the item's vector at once
        assert (("n",), "k299") not in store._vectors
        hits = store.search(("n",), query="y")
        assert sorted(h.key for h in hits) == ["k295", "k296", "k297", "k298"]
        assert all(h.score is not None for h in hits)
