"""Choose HybridScorer's fusion settings on LoCoMo's tuning conversations only.

    python stress/hybrid_tuning.py --data ../shared/data/locomo10.json [--jsonl OUT]
        [--stages rrf convex date]

For every question the BM25 (``bm25-tuned``) and dense (WordLlama, on the same unit
text) rankings are computed once, to a depth of 200, through the engine's own indexes
(units stored with ``created_at`` = their session's time, as the ``hybrid`` retriever
does); then each setting is scored from those lists with the functions
``HybridIndex.top_k`` calls (:func:`~actormem._index.hybrid.fuse_ranks`,
:func:`~actormem._index.hybrid.fuse_scores`, :func:`~actormem._index.hybrid.lift_dated`
with ``HybridIndex.dated``). Three stages:

* ``rrf``: weighted reciprocal rank fusion, dense weight x rank offset x depth;
* ``convex``: convex combination, dense weight x each list's normalisation (divide by
  the list's largest score, or min-max) x depth, no date bonus;
* ``date``: the best convex setting's normalisations and depth, dense weight around its
  choice x date weight, the bonus read from ``created_at`` and mentioned dates (what the
  engine does) or from mentioned dates only (``text``).

In each stage the setting with the best mean overall recall over k = 5, 10, 25, 50 on
conv-26..44 is chosen; conv-47..50 figures are printed beside it and never used.
Deterministic; about three minutes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from actormem._index.dates import Period, query_period
from actormem._index.hybrid import HybridIndex, fuse_ranks, fuse_scores, lift_dated
from actormem._record import Record
from actormem.eval._locomo import (
    CATEGORIES,
    HELD_OUT,
    RETRIEVERS,
    TUNING,
    _ConversationIndex,
    load_locomo,
    recall_at_k,
)

KS = (5, 10, 25, 50)
RRF_WEIGHTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
OFFSETS = (1.0, 10.0, 30.0, 60.0, 100.0)
DEPTHS = (50, 100, 200)
CONVEX_WEIGHTS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
NORMS = ("max", "minmax")
DATE_WEIGHTS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5)

Hits = list[tuple[float, Record]]


@attrs.frozen
class Row:
    """One question: its split, category, evidence, both lists and what the bonus needs."""

    split: str
    category: str
    evidence: tuple[str, ...]
    lexical: Hits
    semantic: Hits
    ci: _ConversationIndex
    period: Period | None


Fuse = Callable[[Row], Hits]


def score(rows: Sequence[Row], fuse: Fuse) -> dict[str, list[float]]:
    """Recall % at KS per ``split/group``."""
    sums: dict[tuple[str, str], list[float]] = {}
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        fused = fuse(row)
        ranked = [row.ci.units[row.ci.position[rec]].id for _, rec in fused[: KS[-1]]]
        for group in (row.category, "overall"):
            acc = sums.setdefault((row.split, group), [0.0] * len(KS))
            counts[(row.split, group)] = counts.get((row.split, group), 0) + 1
            for j, k in enumerate(KS):
                acc[j] += recall_at_k(ranked, row.evidence, k)
    return {
        f"{split}/{group}": [round(100 * v / counts[(split, group)], 2) for v in acc]
        for (split, group), acc in sums.items()
    }


def run_stage(
    name: str, rows: Sequence[Row], settings: Sequence[dict[str, Any]], make: Callable[..., Fuse]
) -> list[dict[str, Any]]:
    """Every setting scored, best tuning mean first (ties keep the earlier setting)."""
    results = []
    for setting in settings:
        recall = score(rows, make(**setting))
        mean = sum(recall["tuning/overall"]) / len(KS)
        results.append({"stage": name, **setting, "tune_mean": round(mean, 3), **recall})
    results.sort(key=lambda r: -float(r["tune_mean"]))
    keys = list(settings[0])
    print(f"\n== {name}: {len(results)} settings, best 12 by tuning mean ==")
    print("  ".join(f"{k:<8}" for k in keys) + "  tune mean  tune @5/@10/@25/@50"
          "          held-out @5/@10/@25/@50")  # fmt: skip
    for r in results[:12]:
        print(
            "  ".join(f"{r[k]!s:<8}" for k in keys)
            + f"  {r['tune_mean']:<9}  {r['tuning/overall']!s:<30} {r['held-out/overall']}"
        )
    best = results[0]
    print("chosen:", json.dumps({k: best[k] for k in keys}))
    for key in sorted(best):
        if key.startswith("held-out/"):
            print(" ", key, best[key])
    return results


def rrf(w: float, c: float, depth: int) -> Fuse:
    return lambda r: fuse_ranks((r.lexical[:depth], r.semantic[:depth]), (1 - w, w), c)


def convex(w: float, bm25_norm: str, dense_norm: str, depth: int) -> Fuse:
    norms = (bm25_norm, dense_norm)
    return lambda r: fuse_scores((r.lexical[:depth], r.semantic[:depth]), (1 - w, w), norms)


def dated(
    w: float, date_weight: float, source: str, bm25_norm: str, dense_norm: str, depth: int
) -> Fuse:
    base = convex(w, bm25_norm, dense_norm, depth)

    def fuse(r: Row) -> Hits:
        fused = base(r)
        period = r.period
        if period is None or date_weight == 0.0:
            return fused
        index = r.ci.index
        assert isinstance(index, HybridIndex)
        if source == "text":
            test: Callable[[Record], bool] = lambda rec: any(  # noqa: E731
                period.contains(p) for p in index._mentions.get(rec, ())
            )
        else:
            test = lambda rec: index.dated(rec, period)  # noqa: E731
        return lift_dated(fused, test, date_weight)

    return fuse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo10.json"))
    parser.add_argument("--jsonl", type=Path)
    parser.add_argument(
        "--stages", nargs="+", choices=("rrf", "convex", "date"), default=["rrf", "convex", "date"]
    )
    args = parser.parse_args(argv)
    conversations = load_locomo(args.data)
    retriever = RETRIEVERS["hybrid"]()
    rows = []
    for conv in conversations:
        split = "tuning" if conv.sample_id in TUNING else "held-out"
        assert conv.sample_id in TUNING or conv.sample_id in HELD_OUT
        ci = _ConversationIndex(retriever, conv)
        index = ci.index
        assert isinstance(index, HybridIndex)
        for q in conv.questions:
            rows.append(
                Row(
                    split=split,
                    category=CATEGORIES[q.category],
                    evidence=q.evidence,
                    lexical=index.bm25.top_k(ci.view, q.question, 200, None),
                    semantic=index.dense.top_k(ci.view, q.question, 200, None),
                    ci=ci,
                    period=query_period(q.question),
                )
            )
    dated_questions = sum(1 for r in rows if r.period is not None)
    print(f"{len(rows)} questions, {dated_questions} naming a period")
    results: list[dict[str, Any]] = []
    settings: list[dict[str, Any]]
    if "rrf" in args.stages:
        grid = itertools.product(RRF_WEIGHTS, OFFSETS, DEPTHS)
        settings = [{"w": w, "c": c, "depth": d} for w, c, d in grid]
        results += run_stage("rrf", rows, settings, rrf)
    best_convex: dict[str, Any] = {
        "w": 0.3,
        "bm25_norm": "max",
        "dense_norm": "minmax",
        "depth": 200,
    }
    if "convex" in args.stages:
        grid2 = itertools.product(CONVEX_WEIGHTS, NORMS, NORMS, (100, 200))
        settings = [
            {"w": w, "bm25_norm": nb, "dense_norm": nd, "depth": d} for w, nb, nd, d in grid2
        ]
        found = run_stage("convex", rows, settings, convex)
        results += found
        best_convex = {k: found[0][k] for k in best_convex}
    if "date" in args.stages:
        w0 = float(best_convex["w"])
        weights = sorted({round(w0 + dw, 2) for dw in (-0.1, -0.05, 0.0, 0.05, 0.1)} - {0.0})
        fixed = {k: best_convex[k] for k in ("bm25_norm", "dense_norm", "depth")}
        settings = [
            {"w": w, "date_weight": dw, "source": src, **fixed}
            for src in ("created+text", "text")
            for w in weights
            for dw in DATE_WEIGHTS
        ]
        results += run_stage("date", rows, settings, dated)
    if args.jsonl:
        with args.jsonl.open("w") as out:
            for r in results:
                out.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
