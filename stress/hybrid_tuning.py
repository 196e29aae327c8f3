"""Choose HybridScorer's fusion settings on LoCoMo's tuning conversations only.

    python stress/hybrid_tuning.py --data ../shared/data/locomo10.json [--jsonl OUT]

For every question the BM25 (``bm25-tuned``) and dense (WordLlama, on the same unit
text) rankings are computed once, to a depth of 200, through the engine's own indexes;
then each fusion setting (dense weight, rank offset, depth) is scored from those lists
with :func:`actormem._index.hybrid.fuse_ranks`, which is what ``HybridIndex.top_k``
does. The setting with the best mean overall recall over k = 5, 10, 25, 50 on
conv-26..44 is chosen; conv-47..50 figures are printed beside it and never used.
Deterministic; about a minute.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from actormem._index.hybrid import HybridIndex, fuse_ranks
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
WEIGHTS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
OFFSETS = (1.0, 10.0, 30.0, 60.0, 100.0)
DEPTHS = (50, 100, 200)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo10.json"))
    parser.add_argument("--jsonl", type=Path)
    args = parser.parse_args(argv)
    conversations = load_locomo(args.data)
    retriever = RETRIEVERS["hybrid"]()
    # (split, category, evidence, bm25 ids, dense ids) per question.
    rows = []
    for conv in conversations:
        split = "tuning" if conv.sample_id in TUNING else "held-out"
        assert conv.sample_id in TUNING or conv.sample_id in HELD_OUT
        ci = _ConversationIndex(retriever, conv)
        index = ci.index
        assert isinstance(index, HybridIndex)
        for q in conv.questions:
            lexical = index.bm25.top_k(ci.view, q.question, 200, None)
            semantic = index.dense.top_k(ci.view, q.question, 200, None)
            rows.append((split, CATEGORIES[q.category], q.evidence, lexical, semantic, ci))
    results = []
    for w, c, depth in itertools.product(WEIGHTS, OFFSETS, DEPTHS):
        sums: dict[tuple[str, str], list[float]] = {}
        counts: dict[tuple[str, str], int] = {}
        for split, cat, evidence, lexical, semantic, ci in rows:
            fused = fuse_ranks((lexical[:depth], semantic[:depth]), (1 - w, w), c)
            ranked = [ci.units[ci.position[rec]].id for _, rec in fused[:50]]
            for group in (cat, "overall"):
                acc = sums.setdefault((split, group), [0.0] * len(KS))
                counts[(split, group)] = counts.get((split, group), 0) + 1
                for j, k in enumerate(KS):
                    acc[j] += recall_at_k(ranked, evidence, k)
        recall = {
            f"{split}/{group}": [round(100 * v / counts[(split, group)], 2) for v in acc]
            for (split, group), acc in sums.items()
        }
        mean = sum(recall["tuning/overall"]) / len(KS)
        results.append({"w": w, "c": c, "depth": depth, "tune_mean": round(mean, 3), **recall})
    results.sort(key=lambda r: -float(r["tune_mean"]))  # type: ignore[arg-type]
    print("w     c      depth  tune mean  tune @5/@10/@25/@50        held-out @5/@10/@25/@50")
    for r in results[:15]:
        print(
            f"{r['w']:<5} {r['c']:<6} {r['depth']:<6} {r['tune_mean']:<10} "
            f"{r['tuning/overall']!s:<26} {r['held-out/overall']}"
        )
    if args.jsonl:
        with args.jsonl.open("w") as out:
            for r in results:
                out.write(json.dumps(r) + "\n")
    best = results[0]
    print("chosen:", json.dumps({k: best[k] for k in ("w", "c", "depth")}))
    for key in sorted(best):
        if key.startswith("held-out/"):
            print(key, best[key])
    return 0


if __name__ == "__main__":
    sys.exit(main())
