"""Scenario 4: bytes per entry beyond the text itself.

Each measurement runs in a fresh interpreter (``python -m stress._bench_memory``), so
nothing an earlier scenario allocated (and the allocator kept) blurs it. The child
reads the corpus, then, with a full collection before each reading of the resident set
size (RSS, ``/proc/self/statm``):

1. ``rss_before``: the corpus read, nothing built;
2. ``rss_entries``: after making ``n`` ``MemoryEntry`` values, each with its own text
   object (as entries arriving from outside have);
3. ``rss_stored``: after storing them all in a ``MemoryState`` (as the owner does:
   publish and vacuum every 512 stores, see ``fill_state``), or with ``--load`` after
   ``MemoryState.load`` of them as a file's rows (as opening a file does), and
   dropping the caller's list (the state holds every entry). With ``--stream`` steps 2
   and 3 are one: each entry is made right before its store and dropped by the caller
   after it (as an agent's stores arrive), so ``rss_entries`` is ``rss_before`` and the
   allocator does not hold on to a million dropped entries at once (``entry_bytes`` and
   ``engine_bytes`` are then None).

Then the garbage collector's view: ``gc_tracked_per_entry``, the objects it tracks in
the process (outside its permanent generation) per entry, and ``full_gc_cpu_s``, the
process CPU time of one full ``gc.collect()`` (the median of three).

``text_bytes`` is the texts' UTF-8 size: the text itself. Reported per entry:

* ``engine_bytes``: ``rss_stored - rss_entries``: records, indexes, orders, the
  lower-cased copy of the text the word-overlap index matches against;
* ``entry_bytes``: ``rss_entries - rss_before - text_bytes``: the ``MemoryEntry`` value
  and its ``str`` header beyond the text;
* ``beyond_text_bytes``: ``rss_stored - rss_before - text_bytes``: everything one stored
  entry costs beyond its UTF-8 text (str headers included). The target reads this one.
* ``beyond_text_trimmed_bytes``: the same after glibc's ``malloc_trim(0)`` (None without
  glibc), read last: what the C allocator kept of freed memory (the caller's dropped
  entries, temporaries) is not counted.

Runtime complexity: one build of ``n`` entries (the state's ``store``, directly).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["measure", "measure_in_child"]


def measure(
    n: int, scorer: str, data: str, load: bool = False, stream: bool = False
) -> dict[str, Any]:
    """The figures above, in this process (call it in a fresh one). ``load`` and
    ``stream`` exclude each other (ValueError)."""
    if load and stream:
        raise ValueError("measure: --load builds from a list, --stream from a generator")
    from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState

    from ._bench_data import entries, load_corpus
    from ._bench_engine import fill_state, make_scorer
    from ._bench_stats import rss_bytes, rss_trimmed_bytes, source_version

    corpus = load_corpus(data)  # marked: every entry has its own text object
    rss_before = rss_bytes()
    text_bytes = 0
    if stream:
        batch: list[Any] = []
        rss_entries = rss_before

        def arriving() -> Any:
            nonlocal text_bytes
            for e in entries(corpus, n):
                text_bytes += len(e.memory.encode("utf-8"))
                yield e

    else:
        batch = list(entries(corpus, n))
        text_bytes = sum(len(e.memory.encode("utf-8")) for e in batch)
        rss_entries = rss_bytes()
    state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make_scorer(scorer))
    start = time.perf_counter()
    if load:
        state.load([(seq, e) for seq, e in enumerate(batch, 1)])
    else:
        fill_state(state, arriving() if stream else batch)
    build_s = time.perf_counter() - start
    del batch  # the state holds every entry
    rss_stored = rss_bytes()
    assert len(state) == n
    gc.collect()
    tracked = len(gc.get_objects())
    cpu = []
    for _ in range(3):
        start = time.process_time()
        gc.collect()
        cpu.append(time.process_time() - start)
    trimmed = rss_trimmed_bytes()
    return {
        "scorer": scorer,
        "n": n,
        "text_bytes_per_entry": text_bytes / n,
        "entry_bytes": None if stream else (rss_entries - rss_before - text_bytes) / n,
        "engine_bytes": None if stream else (rss_stored - rss_entries) / n,
        "beyond_text_bytes": (rss_stored - rss_before - text_bytes) / n,
        "beyond_text_trimmed_bytes": (
            None if trimmed is None else (trimmed - rss_before - text_bytes) / n
        ),
        "rss_stored_mib": rss_stored / 2**20,
        "build_entries_per_s": n / build_s,
        "built_by": "load" if load else "store, streamed" if stream else "store",
        "gc_tracked_per_entry": tracked / n,
        "full_gc_cpu_s": sorted(cpu)[1],
        "actormem_source": source_version(),
    }


def measure_in_child(
    n: int, scorer: str, data: str, load: bool = False, stream: bool = False
) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter. Raises ``CalledProcessError`` if it fails."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "stress._bench_memory",
            "--n",
            str(n),
            "--scorer",
            scorer,
            "--data",
            str(data),
            *(["--load"] if load else []),
            *(["--stream"] if stream else []),
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--scorer", default="word-overlap")
    parser.add_argument("--data", required=True)
    parser.add_argument("--load", action="store_true", help="build by MemoryState.load")
    parser.add_argument(
        "--stream", action="store_true", help="each entry made right before its store"
    )
    args = parser.parse_args()
    if args.load and args.stream:
        parser.error("--load and --stream exclude each other")
    print(json.dumps(measure(args.n, args.scorer, args.data, args.load, args.stream)))


if __name__ == "__main__":
    main()
