"""The word-overlap core's three open-addressing tables at work, for callgrind (branch
tidy24b: ``_oatable.h`` shared by ``DupTable``, ``IdTable`` and ``GroupTable``).

Imports ``actormem`` from ``ROOT`` (a checkout with its C built), then, three rounds of:
``N`` puts into each table from empty (every growth), ``N`` lookups, one iteration of
its items, ``N`` deletes (backward shifts, every shrink). Run it under callgrind once
with ``N`` = 1 and once with a large ``N`` for each checkout; the difference is the
tables' work (the imports and set-up cancel):

    valgrind --tool=callgrind --callgrind-out-file=cg.new python stress/cg_tables.py \\
        /work/wt/tidy24b 100000
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime


def main(argv: list[str]) -> None:
    root, n = argv[0], int(argv[1])
    sys.path.insert(0, root)
    from actormem import MemoryCategory, MemoryEntry
    from actormem._index import kernels
    from actormem._index.wordoverlap.numbering import _Group
    from actormem._record import Record

    wo = kernels._wo
    assert wo is not None, "the word-overlap core is not built in " + root
    base = datetime(2026, 1, 1, tzinfo=UTC)
    recs = [
        Record(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"text {i}",
                id=uuid.UUID(int=i + 1),
                created_at=base,
            ),
            i + 1,
            i + 1,
        )
        for i in range(n)
    ]
    ids = [r.entry._id for r in recs]
    texts = [r.entry.memory for r in recs]
    keys = [i * 7919 % (1 << 30) for i in range(n)]
    for text in texts:
        hash(text)
    slots = (Record.__dict__["entry"], MemoryEntry.__dict__["memory"], _Group.__dict__["text"])
    for _ in range(3):
        d = wo.DupTable()
        for i in range(n):
            d[keys[i]] = recs[i]
        for i in range(n):
            d.get(keys[i])
        for _item in d.items():
            pass
        for i in range(n):
            del d[keys[i]]
        t = wo.IdTable(Record.__dict__["entry"], MemoryEntry.__dict__["_id"])
        for i in range(n):
            t[ids[i]] = recs[i]
        for i in range(n):
            t.get(ids[i])
        for _item in t.items():
            pass
        for i in range(n):
            del t[ids[i]]
        g = wo.GroupTable(list(recs), *slots)
        for i in range(n):
            g[texts[i]] = i
        for i in range(n):
            g.get(texts[i])
        for _item in g.items():
            pass
        for i in range(n):
            del g[texts[i]]
    print("done", n)


if __name__ == "__main__":
    main(sys.argv[1:])
