"""Issue #20, item 6: the sizes and read costs of a columnar entry layout, measured
before it is built (the plan in docs/benchmarks.md, "Bytes per entry, part 8").

Run in a fresh interpreter (``python -m stress._bench_columns --n 1000000 --data DIR``).
Two parts, printed as one JSON line:

1. **Bytes.** The columns the plan would keep per stored entry and record, filled from
   the same corpus texts, ids and times as ``stress._bench_memory`` (which measures the
   engine as it is), and the resident set size (RSS, after a full collection) they add,
   minus the texts' UTF-8 bytes: ``column_bytes`` is comparable to ``_bench_memory``'s
   ``entry_bytes`` plus the record's share of its ``engine_bytes`` (the 80-byte
   ``Record`` and its 32-byte version int). The columns: the id's 16 bytes, created-at
   microseconds (``int64``; ``updated_at`` kept sparse, as it equals ``created_at``
   unless an upsert moved it), a byte of category and flags, the relevance (``float64``),
   the text as UTF-8 in one growing buffer with an ``int64`` end offset per text, and
   the record's ``born``, ``died`` and ``seq`` (``int64`` each). Tags, namespace, key,
   value, ttl, expiry, last access and access chains are sparse (a dict by slot number:
   none in this corpus). ``text_list`` does the same with one ``bytes`` object per text
   in a list instead of the shared buffer. ``--from-entries`` makes all ``n`` entries
   first and drops them once the columns hold them, as a store of the caller's entries
   would: then ``column_bytes`` also counts what the allocator keeps of the dropped
   entries (the figure the engine's ``beyond_text_bytes`` would read);
   ``column_trimmed_bytes`` is read after glibc's ``malloc_trim(0)`` (None without it).
2. **Reads.** The thread CPU time to build one ``MemoryEntry`` from those columns
   (``entry_of_checked`` of the decoded text, the id's int, the datetime and the
   category), against ``_entry.with_access`` of a stored entry (what every returned
   entry costs today), the UTF-8 decode alone, and the file decoder's C path per row
   (``sqlite_format.decode_rows``: a proxy for a builder in C); the median of ``--repeats`` passes
   over ``--reads`` random slots.

``--store`` (branch cols28) fills the compiled store instead (``EntryColumns``,
``actormem/_index/entrycols.py``: 48-byte slots and UTF-8 text blocks, an entry built in C
on read), each entry put as the engine's store would put it, and adds its read costs:
``store_entry_us`` (``entry(slot)``), ``store_entry_access_us`` (``entry(slot, count,
last)``, what ``with_access`` gives today), ``store_text_us`` (``text(slot)``). Its
``column_bytes`` has no ``born``/``died``/``seq`` (those are the record's, step B).

Runtime complexity: O(n) to fill, O(repeats * reads) to time.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from array import array
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["measure"]

_EPOCH_US = datetime(1970, 1, 1, tzinfo=UTC)


def _fill(source: Iterable[Any], shared_buffer: bool) -> tuple[dict[str, Any], int]:
    """The columns of the entries of ``source`` (read as the owner would read a stored
    entry's fields) and the texts' UTF-8 byte count. O(total size)."""
    one_us = timedelta(microseconds=1)
    cats: dict[Any, int] = {}
    ids = bytearray()
    created = array("q")
    meta = bytearray()
    rel = array("d")
    ends = array("q")
    buf = bytearray()
    texts: list[bytes] = []
    born, died, seq = array("q"), array("q"), array("q")
    text_bytes = 0
    for i, entry in enumerate(source):
        raw = entry.memory.encode("utf-8")
        text_bytes += len(raw)
        if shared_buffer:
            buf += raw
            ends.append(len(buf))
        else:
            texts.append(raw)
        ids += entry._id.to_bytes(16, "big")
        created.append((entry.created_at - _EPOCH_US) // one_us)
        meta.append(cats.setdefault(entry.category, len(cats)))
        rel.append(entry.relevance)
        born.append(i + 1)
        died.append(2**63 - 1)
        seq.append(i + 1)
    cols = {
        "ids": ids,
        "created": created,
        "meta": meta,
        "rel": rel,
        "ends": ends,
        "buf": buf,
        "texts": texts,
        "born": born,
        "died": died,
        "seq": seq,
        "sparse": {},
        "cats": {v: k for k, v in cats.items()},
    }
    return cols, text_bytes


def _fill_store(source: Iterable[Any]) -> tuple[Any, int]:
    """The compiled store of the entries of ``source`` and the texts' UTF-8 byte count.
    O(total size)."""
    from actormem._index.entrycols import new_entry_columns

    store = new_entry_columns()
    if store is None:
        raise SystemExit("--store needs the compiled word-overlap core")
    text_bytes = 0
    for entry in source:
        store.put(entry)
        text_bytes += len(entry.memory.encode("utf-8"))
    return store, text_bytes


def _build(cols: dict[str, Any], slot: int) -> Any:
    """The ``MemoryEntry`` of ``slot``, made from the columns (the read path the plan
    needs). O(len(text))."""
    from actormem._entry import entry_of_checked

    ends = cols["ends"]
    if ends:
        start = ends[slot - 1] if slot else 0
        text = cols["buf"][start : ends[slot]].decode("utf-8")
    else:
        text = cols["texts"][slot].decode("utf-8")
    at = 16 * slot
    ident = int.from_bytes(cols["ids"][at : at + 16], "big")
    created = _EPOCH_US + timedelta(microseconds=cols["created"][slot])
    category, relevance = cols["cats"][cols["meta"][slot]], cols["rel"][slot]
    # No tags, namespace, access, key, value, ttl or expiry: the sparse fields (none here).
    rest = ((), None, None, None, created, None, None)
    return entry_of_checked(category, text, ident, (), created, relevance, 0, False, *rest)


def _timed(fn: Any, items: list[Any], repeats: int) -> float:
    """Median thread CPU seconds per item of ``fn`` over ``items``. O(repeats * len)."""
    out = []
    for _ in range(repeats):
        start = time.thread_time()
        for x in items:
            fn(x)
        out.append((time.thread_time() - start) / len(items))
    return sorted(out)[len(out) // 2]


def measure(
    n: int,
    data: str,
    reads: int,
    repeats: int,
    shared_buffer: bool,
    from_entries: bool = False,
    store: bool = False,
) -> dict[str, Any]:
    """The figures above, in this process (call it in a fresh one). ``from_entries``: the
    ``n`` entries made first, as ``_bench_memory`` makes them, and dropped once the
    columns hold them (what the allocator gives back of them counts), else each entry
    made and dropped in turn. ``store``: the compiled store filled instead."""
    from actormem._entry import with_access

    from ._bench_data import entries, load_corpus
    from ._bench_stats import rss_bytes, rss_trimmed_bytes

    corpus = load_corpus(data)
    rss_before = rss_bytes()
    fill: Any = _fill_store if store else (lambda src: _fill(src, shared_buffer))
    if from_entries:
        batch = list(entries(corpus, n))
        cols, text_bytes = fill(batch)
        del batch
    else:
        cols, text_bytes = fill(entries(corpus, n))
    rss_cols = rss_bytes()
    trimmed = rss_trimmed_bytes()
    rng = random.Random(0)
    slots = [rng.randrange(n) for _ in range(reads)]
    stored = list(entries(corpus, min(n, 4096)))
    held = [stored[s % len(stored)] for s in slots]
    if store:
        return _measure_store(
            cols,
            n,
            slots,
            held,
            repeats,
            text_bytes,
            rss_before,
            rss_cols,
            trimmed,
            from_entries,
            next(iter(entries(corpus, 1, start=5))),
        )
    build = _timed(lambda s: _build(cols, s), slots, repeats)
    access = _timed(lambda e: with_access(e, 1, None), held, repeats)
    ends, buf = cols["ends"], cols["buf"]

    def decode(s: int) -> str:
        if ends:
            start = ends[s - 1] if s else 0
            return bytes(buf[start : ends[s]]).decode("utf-8")
        return str(cols["texts"][s].decode("utf-8"))

    dec = _timed(decode, slots, repeats)
    # A C builder's cost, by proxy: the file decoder's C path makes each entry from a
    # stored row (text fields and ISO times parsed: more work than typed columns).
    from actormem._record import Record
    from actormem._storage.sqlite_format import decode_rows, encode_records

    rows = encode_records([Record(e, i + 1, i + 1) for i, e in enumerate(stored)])
    chunks = [rows[at : at + 64] for at in range(0, len(rows), 64)]
    c_row = _timed(lambda c: decode_rows("bench", c), chunks, repeats) / 64
    assert _build(cols, 5) == next(iter(entries(corpus, 1, start=5)))
    gc.collect()
    return {
        "n": n,
        "layout": "buffer" if shared_buffer else "text_list",
        "from_entries": from_entries,
        "text_bytes_per_entry": text_bytes / n,
        "column_bytes": (rss_cols - rss_before - text_bytes) / n,
        "column_trimmed_bytes": (
            None if trimmed is None else (trimmed - rss_before - text_bytes) / n
        ),
        "build_entry_us": build * 1e6,
        "with_access_us": access * 1e6,
        "decode_text_us": dec * 1e6,
        "decode_row_c_us": c_row * 1e6,
    }


def _measure_store(
    store: Any,
    n: int,
    slots: list[int],
    held: list[Any],
    repeats: int,
    text_bytes: int,
    rss_before: int,
    rss_cols: int,
    trimmed: int | None,
    from_entries: bool,
    fifth: Any,
) -> dict[str, Any]:
    """:func:`measure`'s figures for the compiled store. O(repeats * reads)."""
    from actormem._entry import with_access

    assert store.entry(5) == fifth
    entry, text = store.entry, store.text
    return {
        "n": n,
        "layout": "store",
        "from_entries": from_entries,
        "text_bytes_per_entry": text_bytes / n,
        "column_bytes": (rss_cols - rss_before - text_bytes) / n,
        "column_trimmed_bytes": (
            None if trimmed is None else (trimmed - rss_before - text_bytes) / n
        ),
        "store_nbytes_per_entry": store.stats()["nbytes"] / n,
        "store_entry_us": _timed(entry, slots, repeats) * 1e6,
        "store_entry_access_us": _timed(lambda s: entry(s, 1, None), slots, repeats) * 1e6,
        "store_text_us": _timed(text, slots, repeats) * 1e6,
        "with_access_us": _timed(lambda e: with_access(e, 1, None), held, repeats) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--reads", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--text-list", action="store_true", help="a bytes object per text")
    parser.add_argument("--from-entries", action="store_true", help="all entries made first")
    parser.add_argument("--store", action="store_true", help="the compiled EntryColumns")
    args = parser.parse_args()
    out = measure(
        args.n,
        args.data,
        args.reads,
        args.repeats,
        not args.text_list,
        args.from_entries,
        args.store,
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
