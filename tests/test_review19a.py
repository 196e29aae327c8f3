"""Review 19a: the split row reader (open13), the BM25 lookups over length codes (bm25q6)
and the relevance order keyed by ``(-relevance, seq)`` (entrybytes2).

* ``read_entries(..., threaded=True)`` gives what the one-thread read gives for any
  ``max_memory`` (its ASCII path compared the text's length to the limit cut to 32
  bits: a limit of 2**32 or more declined every ASCII text the one-thread read took).

stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actormem._storage import sqlite_format

from .test_decode_c import _reader_args
from .test_open13_split import _file, _read, _texts, _threads

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)


@needs_reader
@pytest.mark.parametrize("limit", [2**32, 2**32 + 5, 2**40, 2**63 - 1, 0, 3, 13, 301])
def test_the_split_reader_takes_the_memory_limit_as_the_one_thread_reader(
    tmp_path: Path, limit: int
) -> None:
    """Every memory-length limit, 32 bits or more included, gives the same entries (or
    the same None) with and without the thread."""
    uri = _file(tmp_path / "f.db", _texts(12))
    args = _reader_args()
    args[7] = limit  # max_memory
    one = _read(uri, False, args=args)
    split = _read(uri, True, args=args)
    if one is None:
        assert split is None
    else:
        assert split is not None
        assert [(s, e) for s, e in split] == [(s, e) for s, e in one]
    assert _threads() == 0
