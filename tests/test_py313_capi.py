"""The compiled modules on every supported CPython (3.11, 3.12, 3.13; branch py313).

CPython 3.13 moved ``_Py_HashBytes``'s declaration out of the public headers and gave
``_PyLong_AsByteArray`` a sixth argument. Built from the sources before, the word-overlap
core did not compile there, and the row reader compiled with ``_Py_HashBytes`` declared
implicitly (an ``int``): the hashes it cached in the texts it read were cut to 32 bits,
so an opened memory's texts hashed unlike equal strs (a dict or set missed them). The
modules now take str's hash from one place (``_kernels_common.h``, checked against
``hash(str)`` at import) and convert ints with ``PyLong_AsNativeBytes`` on 3.13. These
tests compare each C value with what Python computes, on whichever Python runs them.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index import kernels
from actormem._index.entrycols import new_entry_columns
from actormem._index.persist import _first_mask, _groups_of
from actormem._storage import sqlite_format

from .test_decode_c import _reader_args
from .test_open_hash import _file

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)
needs_core = pytest.mark.skipif(kernels._wo is None, reason="the word-overlap core is not built")


def _fresh(text: str) -> str:
    """An equal str made anew, its hash not yet computed (not the same object)."""
    return "".join(list(text)) if len(text) > 1 else (text + "x")[:-1]


#: ASCII texts of every length up to 120 (short and long inputs of str's hash), a few
#: with every byte value of ASCII, and some that are not ASCII (hashed by Python).
ASCII = ["".join(chr(32 + (i * 7 + n) % 95) for i in range(n)) for n in range(1, 121)]
TEXTS = [*ASCII, "".join(map(chr, range(1, 128))), "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001f600!"]


def _same_hashes(texts: list[str]) -> None:
    for t in texts:
        want = hash(_fresh(t))
        assert hash(t) == want, t
        if t.isascii():
            assert hash(t) == hash(t.encode("ascii")), t  # str's hash over its bytes


@needs_reader
@pytest.mark.parametrize("threaded", [False, True])
def test_the_reader_caches_the_hash_python_computes(tmp_path: Path, threaded: bool) -> None:
    uri = _file(tmp_path / "h.db", TEXTS * 3)
    assert sqlite_format._crows is not None
    got = sqlite_format._crows.read_entries(
        uri, sqlite_format.SELECT_ENTRIES, *_reader_args(), True, threaded
    )
    assert got is not None
    texts = [e.memory for _, e in got]
    assert texts == TEXTS * 3
    _same_hashes(texts)
    assert len(set(texts) | {_fresh(t) for t in TEXTS}) == len(TEXTS)


async def test_an_opened_memory_s_texts_hash_as_equal_strs(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    entries = [MemoryEntry(category=MemoryCategory.FACT, memory=t) for t in TEXTS * 5]
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        await memory.store_many(entries)
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        view = memory._state.view()
        texts = [view.entry(r).memory for r in view.records()]
        assert sorted(texts) == sorted(TEXTS * 5)
        _same_hashes(texts)
        by_text = {t: 0 for t in texts}
        assert all(_fresh(t) in by_text for t in TEXTS)


@needs_core
def test_first_appearances_alike_with_cached_and_computed_hashes() -> None:
    # An ASCII str's table hash is its cached hash when it has one, else str's hash
    # computed from its bytes in C: the two must agree, or an equal pair is missed. The
    # table has 2**17 slots here: its slot numbers take hash bits past the 32nd.
    texts = [f"{i} {ASCII[i % len(ASCII)]}" for i in range(20_000)] + TEXTS
    cached = [_fresh(t) for t in texts]
    for t in cached:
        hash(t)
    uncached = [_fresh(t) for t in texts]  # equal texts, no hash yet
    own = tuple(x for pair in zip(cached, uncached, strict=True) for x in pair)
    want = bytes(i % 2 == 0 for i in range(len(own)))  # dict.fromkeys: the cached one first
    assert _first_mask(own) == want
    groups = _groups_of(tuple(_fresh(t) for t in cached) + own)
    assert groups is not None
    mask, gids = groups
    assert mask == b"\1" * len(cached) + bytes(len(own))
    ids = memoryview(gids).cast("q").tolist()
    assert ids == list(range(len(cached))) + [i // 2 for i in range(len(own))]


@needs_core
@pytest.mark.parametrize(
    "ident", [0, 1, 255, 2**63, 2**64 - 1, 2**64, 2**127, 2**127 + 1, 2**128 - 2, 2**128 - 1]
)
def test_ids_of_128_bits_go_in_and_come_back(ident: int) -> None:
    cols = new_entry_columns()
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="m", id=uuid.UUID(int=ident))
    slot = cols.put(entry)
    assert cols.ident(slot) == ident
    got: Any = cols.entry(slot)
    assert got._id == ident
    assert got.id == uuid.UUID(int=ident)
    assert got == entry


@needs_core
@pytest.mark.parametrize("ident", [-1, -(2**127), 2**128, 2**129 + 5])
def test_an_id_out_of_128_bits_is_refused(ident: int) -> None:
    cols = new_entry_columns()
    entry = MemoryEntry.new(MemoryCategory.FACT, "x")
    object.__setattr__(entry, "_id", ident)
    with pytest.raises(ValueError, match=r"not in \[0, 2\*\*128\)"):
        cols.put(entry)
    assert len(cols) == 0
