"""``stress._bench_columns`` (issue #20, item 6, "Bytes per entry, part 8"): the
columnar entry layout it sizes gives back every entry as the engine stores it (texts of
every width, ids, times, categories), in both text layouts, and its figures are there.
No timing thresholds: benchmarks report figures, tests assert behaviour."""

from __future__ import annotations

import math

import pytest

from actormem._index import kernels
from stress import _bench_columns
from stress._bench_data import DEFAULT_DATA, entries, load_corpus

from .realdata import needs_real_file

pytestmark = needs_real_file("locomo10.json")


@pytest.mark.parametrize("shared_buffer", [True, False])
def test_columns_give_back_every_entry(shared_buffer: bool) -> None:
    corpus = load_corpus(DEFAULT_DATA)
    n = 600
    want = list(entries(corpus, n))
    cols, text_bytes = _bench_columns._fill(want, shared_buffer)
    assert text_bytes == sum(len(e.memory.encode("utf-8")) for e in want)
    assert any(not e.memory.isascii() for e in want)  # the decode is exercised
    for slot, entry in enumerate(want):
        got = _bench_columns._build(cols, slot)
        assert got == entry
        assert got.id == entry.id
        assert got.created_at == entry.created_at


@pytest.mark.parametrize("from_entries", [True, False])
def test_measure_reports_its_figures(from_entries: bool) -> None:
    out = _bench_columns.measure(
        300, str(DEFAULT_DATA), reads=50, repeats=1, shared_buffer=True, from_entries=from_entries
    )
    assert out["from_entries"] is from_entries
    assert out["n"] == 300
    assert out["layout"] == "buffer"
    for name in ("build_entry_us", "with_access_us", "decode_text_us", "decode_row_c_us"):
        assert math.isfinite(out[name]), name
        assert out[name] > 0, name
    assert math.isfinite(out["column_bytes"])
    trimmed = out["column_trimmed_bytes"]
    assert trimmed is None or math.isfinite(trimmed)


def test_memory_benchmark_reports_the_trimmed_figure() -> None:
    from stress import _bench_memory
    from stress._bench_stats import rss_trimmed_bytes

    out = _bench_memory.measure(300, "word-overlap", str(DEFAULT_DATA))
    assert math.isfinite(out["beyond_text_bytes"])
    if rss_trimmed_bytes() is None:
        assert out["beyond_text_trimmed_bytes"] is None
    else:
        assert math.isfinite(out["beyond_text_trimmed_bytes"])


def test_bench_store_mode_reports_its_figures() -> None:
    """``--store`` (branch cols28): the compiled store's figures are there."""
    if kernels._wo is None:
        pytest.skip("the word-overlap core is not built")
    for from_entries in (False, True):
        out = _bench_columns.measure(
            300,
            str(DEFAULT_DATA),
            reads=50,
            repeats=1,
            shared_buffer=True,
            from_entries=from_entries,
            store=True,
        )
        assert out["layout"] == "store"
        assert out["from_entries"] is from_entries
        assert out["text_bytes_per_entry"] > 0
        assert out["store_nbytes_per_entry"] > 48
        for key in ("store_entry_us", "store_entry_access_us", "store_text_us", "with_access_us"):
            assert out[key] > 0, key
