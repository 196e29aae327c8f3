"""The peers benchmark's two timed orders (stress/_bench_peers.py): which call follows which."""

from __future__ import annotations

import pytest

from stress._bench_peers import block_orders

from .realdata import real_file


def test_block_orders_interleave_the_cold_list_and_block_the_warm_one() -> None:
    plan = block_orders(["peer", "wo", "bm"], ["a", "b", "c"], ["x", "y", "z"], block=2)
    assert plan == [
        ("interleaved", "peer", "a"), ("interleaved", "wo", "a"), ("interleaved", "bm", "a"),
        ("interleaved", "peer", "b"), ("interleaved", "wo", "b"), ("interleaved", "bm", "b"),
        ("blocks", "peer", "x"), ("blocks", "peer", "y"),
        ("blocks", "wo", "x"), ("blocks", "wo", "y"),
        ("blocks", "bm", "x"), ("blocks", "bm", "y"),
        ("interleaved", "peer", "c"), ("interleaved", "wo", "c"), ("interleaved", "bm", "c"),
        ("blocks", "peer", "z"), ("blocks", "wo", "z"), ("blocks", "bm", "z"),
    ]  # fmt: skip


def test_block_orders_every_call_once_with_lists_of_other_lengths() -> None:
    names = ["peer", "wo"]
    plan = block_orders(names, ["a", "b", "c"], ["x"], block=2)
    assert sorted(plan) == sorted(
        [("interleaved", n, q) for q in "abc" for n in names] + [("blocks", n, "x") for n in names]
    )
    assert block_orders(names, [], []) == []


def test_block_orders_refuses_an_empty_block() -> None:
    with pytest.raises(ValueError, match="block"):
        block_orders(["peer"], ["a"], ["b"], block=0)


def test_peers_cold_runs_every_order_on_a_small_memory() -> None:
    from stress.peers_cold import main

    real_file("locomo10.json")
    real_file("tool_calls.jsonl")
    lines = main(["--n", "300", "--q", "6", "--flush-mib", "1", "--no-fresh-scan"])
    labels = {line[:24].strip() for line in lines}
    assert len(lines) == 2 * 7 + 2
    assert "after the scan" in labels
    assert "flushed" in labels


def test_cold_retrieve_runs_every_order_and_the_steps_on_a_small_memory() -> None:
    from stress.cold_retrieve import main

    real_file("locomo10.json")
    real_file("tool_calls.jsonl")
    lines = main(["--n", "300", "--q", "4", "--thrash-mib", "1", "--objects", "--scan", "1"])
    labels = {tuple(line.split()[:2]) for line in lines}
    for order in ("warm", "thrash", "objects", "scan"):
        assert (order, "retrieve") in labels
        assert (order, "top_k") in labels
    fresh = main(["--n", "300", "--q", "8", "--thrash-mib", "1", "--fresh", "--steps"])
    assert {tuple(line.split()[:2]) for line in fresh} == {
        (o, c) for o in ("warm", "thrash") for c in ("retrieve", "top_k")
    }
    assert all(" n   2 " in line for line in fresh)  # each question once, in rotation
