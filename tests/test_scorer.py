"""The word-overlap scorer's pinned numbers (loopctl's formula as its code computes it)."""

from __future__ import annotations

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index.wordoverlap import word_overlap_score


def fact(text: str, relevance: float = 1.0, *tags: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_relevance(relevance).with_tags(*tags)


async def scores(query: str, *entries: MemoryEntry, limit: int = 10) -> list[tuple[str, float]]:
    async with open_memory() as memory:
        for e in entries:
            await memory.store(e)
        return [(s.entry.memory, s.score) for s in await memory.retrieve_scored(query, limit)]


async def test_documented_example_as_the_code_computes_it() -> None:
    # loopctl's docs claim 1.00 for the second entry; its code gives 0.60 (the tag
    # "deploy" does not contain the whole query "deploy the blue service").
    got = await scores(
        "deploy the blue service",
        fact("deploys go to the blue cluster", 0.8, "infra"),
        fact("meetings are on tuesdays", 1.0, "deploy"),
    )
    assert [t for t, _ in got] == ["deploys go to the blue cluster", "meetings are on tuesdays"]
    assert got[0][1] == pytest.approx(0.80, abs=1e-9)
    assert got[1][1] == pytest.approx(0.60, abs=1e-9)


async def test_glob_example() -> None:
    got = await scores(
        "Glob manual file search",
        fact("Edit failures often caused by stale file content"),
        fact("Prefer Glob over manual file search"),
    )
    assert got[0] == ("Prefer Glob over manual file search", pytest.approx(1.0))
    assert got[1] == ("Edit failures often caused by stale file content", pytest.approx(0.7))


async def test_duplicate_query_words_count_each_time() -> None:
    got = await scores("rust rust go", fact("rust"))
    assert got[0][1] == pytest.approx(0.8667, abs=1e-4)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
async def test_relevance_orders_results(order: tuple[int, int, int]) -> None:
    pool = [fact("rust is fast", 0.95), fact("rust book", 0.5), fact("rust", 0.1)]
    got = await scores("rust", *(pool[i] for i in order))
    assert [s for _, s in got] == pytest.approx([0.975, 0.75, 0.55])


async def test_tag_bonus_needs_whole_trimmed_query_and_no_blank_query() -> None:
    tagged = fact("nothing in common", 1.0, "Blue-Deploy")
    got = await scores("  deploy  ", tagged)
    assert got[0][1] == pytest.approx(0.5 + 0.3 + 0.1)  # trimmed, lower-cased
    got = await scores("blue deploy", tagged)
    assert got[0][1] == pytest.approx(0.6)  # the whole query is not in the tag
    got = await scores("   ", tagged)
    assert got[0][1] == pytest.approx(0.6)  # blank query: no bonus


async def test_substring_case_and_punctuation() -> None:
    got = await scores("DEPLOY, blue", fact("Deploys happen on the Blue cluster"))
    # "deploy," (comma kept) is not in the text; "blue" is.
    assert got[0][1] == pytest.approx(0.5 + 0.4 * 0.5 + 0.1)


async def test_limits_ties_and_no_minimum() -> None:
    a, b, c = fact("alpha"), fact("beta"), fact("gamma")
    got = await scores("zzz", a, b, c)
    assert [t for t, _ in got] == ["alpha", "beta", "gamma"]  # ties keep insertion order
    assert await scores("zzz", a, b, c, limit=0) == []
    assert len(await scores("zzz", a, b, c, limit=2)) == 2
    assert await scores("anything") == []


def test_reference_function_and_scorer_agree() -> None:
    s = WordOverlapScorer()
    assert s.name == "word-overlap"
    assert s.score_entry("rust", (), 1.0, "rust rust go") == word_overlap_score(
        "rust", (), 1.0, "rust rust go"
    )


async def test_maxscore_tie_with_a_non_essential_word_keeps_insertion_order() -> None:
    # With a budget of one posting, "xq" is scored from its posting list and "yy" is
    # tested per visited entry. Both entries score 0.8: the earlier one must win even
    # though the exhaustive phase found the later one first.
    async with open_memory(scorer=WordOverlapScorer(essential_budget=1)) as memory:
        await memory.store(fact("yy"))
        await memory.store(fact("xq"))
        got = await memory.retrieve_scored("xq yy", 1)
        assert [(s.entry.memory, s.score) for s in got] == [("yy", pytest.approx(0.8))]
        got = await memory.retrieve_scored("xq yy", 2)
        assert [s.entry.memory for s in got] == ["yy", "xq"]
