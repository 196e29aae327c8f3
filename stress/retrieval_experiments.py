"""Every retrieval attempt of docs/retrieval.md, reproducibly, on LoCoMo.

Usage::

    python stress/retrieval_experiments.py [--data ../shared/data/locomo10.json]
        [--jsonl OUT] [--stages tokenizer bm25 fields context bm25-context rerank]

The stages run in order. Each stage tries a few variants of the best retriever so far;
each variant is scored on the *tuning* conversations (conv-26..conv-44) and the one with
the highest mean overall recall over k = 5, 10, 25, 50 is kept (ties keep the earlier,
simpler one). Held-out figures (conv-47..conv-50) are computed and printed for every
attempt but never read by the choice. Everything is deterministic: no seed is needed.

Output: one markdown table row per attempt on stdout (paste into docs/retrieval.md) and,
with ``--jsonl``, one JSON object per attempt. Needs PyStemmer and bm25s (for NLTK's
stop-word list) besides actormem.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from actormem._index.bm25 import BM25Scorer
from actormem._index.tokenize import Tokenizer, stop_words
from actormem.eval._locomo import (
    HELD_OUT,
    RETRIEVERS,
    TUNING,
    Conversation,
    EvalResult,
    Retriever,
    evaluate,
    load_locomo,
)

KS = (5, 10, 25, 50)
Variants = Callable[[Retriever], list[Retriever]]


def _scorer(base: Retriever, **changes: Any) -> BM25Scorer:
    return attrs.evolve(base.scorer, **changes)


def tokenizer_stage(base: Retriever) -> list[Retriever]:
    def tok(name: str, tokenizer: Tokenizer) -> Retriever:
        return attrs.evolve(base, name=name, scorer=_scorer(base, tokenizer=tokenizer))

    return [
        tok("stem (Snowball english)", Tokenizer(stemmer="english")),
        tok("stop words (stop-words, 1333)", Tokenizer(stopwords=stop_words("english"))),
        tok("stop words (NLTK, 179)", Tokenizer(stopwords=stop_words("english", "nltk"))),
        tok(
            "stem + stop-words 1333",
            Tokenizer(stemmer="english", stopwords=stop_words("english")),
        ),
        tok(
            "stem + NLTK 179",
            Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk")),
        ),
        tok(
            "stem (porter) + NLTK 179",
            Tokenizer(stemmer="porter", stopwords=stop_words("english", "nltk")),
        ),
    ]


def _grid(base: Retriever) -> list[Retriever]:
    out = []
    for k1 in (0.6, 0.9, 1.2, 1.5, 2.0):
        for b in (0.1, 0.3, 0.5, 0.75, 0.9):
            if (k1, b) != (base.scorer.k1, base.scorer.b):
                out.append(
                    attrs.evolve(base, name=f"k1={k1} b={b}", scorer=_scorer(base, k1=k1, b=b))
                )
    return out


def fields_stage(base: Retriever) -> list[Retriever]:
    return [
        attrs.evolve(base, name="speaker x0", speaker_weight=0),
        attrs.evolve(base, name="speaker x2", speaker_weight=2),
        attrs.evolve(base, name="caption x0", caption_weight=0),
        attrs.evolve(base, name="caption x2", caption_weight=2),
        attrs.evolve(base, name="text x2", text_weight=2),
    ]


def context_stage(base: Retriever) -> list[Retriever]:
    out = []
    for context in (1, 2, 3, 4, 6):
        for text_weight in (1, 2, 3, 5):
            out.append(
                attrs.evolve(
                    base,
                    name=f"context {context}, own text x{text_weight}",
                    context=context,
                    text_weight=text_weight,
                )
            )
    return out


def rerank_stage(base: Retriever) -> list[Retriever]:
    out = [attrs.evolve(base, name=f"neighbour smoothing {s}", smooth=s) for s in (0.2, 0.3, 0.5)]
    for docs, terms, weight in ((5, 10, 0.3), (5, 10, 0.5), (10, 20, 0.2), (10, 20, 0.3)):
        out.append(
            attrs.evolve(
                base,
                name=f"RM3 {docs} docs, {terms} terms, weight {weight}",
                prf_docs=docs,
                prf_terms=terms,
                prf_weight=weight,
            )
        )
    return out


STAGES: dict[str, Variants] = {
    "tokenizer": tokenizer_stage,
    "bm25": _grid,
    "fields": fields_stage,
    "context": context_stage,
    "bm25-context": _grid,
    "rerank": rerank_stage,
}


def mean(result: EvalResult) -> float:
    return sum(result.recall["overall"][k] for k in KS) / len(KS)


def describe(r: Retriever) -> dict[str, object]:
    tok = r.scorer.tokenizer
    return {
        "k1": r.scorer.k1,
        "b": r.scorer.b,
        "tokenizer": getattr(tok, "name", repr(tok)),
        **{
            f.name: getattr(r, f.name)
            for f in attrs.fields(Retriever)
            if f.name not in ("name", "scorer")
        },
    }


def row(stage: str, label: str, tune: EvalResult, held: EvalResult, kept: str) -> str:
    t = " | ".join(f"{tune.recall['overall'][k]:.1f}" for k in KS)
    h = " | ".join(f"{held.recall['overall'][k]:.1f}" for k in KS)
    return f"| {stage} | {label} | {t} | {mean(tune):.2f} | {h} | {kept} |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo10.json"))
    parser.add_argument("--jsonl", type=Path, help="write one JSON object per attempt")
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    args = parser.parse_args(argv)

    conversations = load_locomo(args.data)
    tune: list[Conversation] = [c for c in conversations if c.sample_id in TUNING]
    held: list[Conversation] = [c for c in conversations if c.sample_id in HELD_OUT]
    out = args.jsonl.open("w", encoding="utf-8") if args.jsonl else None
    start = time.perf_counter()

    def attempt(stage: str, r: Retriever) -> tuple[EvalResult, EvalResult]:
        rt, rh = evaluate(tune, r, KS), evaluate(held, r, KS)
        if out is not None:
            record = {
                "stage": stage,
                "attempt": r.name,
                "config": describe(r),
                "tuning": {str(k): rt.recall["overall"][k] for k in KS},
                "held_out": {str(k): rh.recall["overall"][k] for k in KS},
                "tuning_mean": mean(rt),
            }
            out.write(json.dumps(record) + "\n")
        return rt, rh

    print("| stage | attempt | tune @5 | @10 | @25 | @50 | tune mean | held-out @5 | @10 | @25 "
          "| @50 | kept |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    best = attrs.evolve(RETRIEVERS["bm25"](), name="plain BM25 (k1 1.5, b 0.75, \\w+ casefold)")
    best_tune, best_held = attempt("baseline", best)
    print(row("baseline", best.name, best_tune, best_held, "start"))
    for stage in args.stages:
        for variant in STAGES[stage](best):
            rt, rh = attempt(stage, variant)
            better = mean(rt) > mean(best_tune)
            print(row(stage, variant.name, rt, rh, "**kept**" if better else ""), flush=True)
            if better:
                best, best_tune, best_held = variant, rt, rh
        # Later comparisons start from the stage's winner; name it by its configuration.
        best = attrs.evolve(best, name=f"best after {stage}")
    print()
    print("chosen:", json.dumps(describe(best)))
    print(row("chosen", best.name, best_tune, best_held, ""))
    tuned = RETRIEVERS["bm25-tuned"]()
    if describe(tuned) != describe(best):
        print("note: RETRIEVERS['bm25-tuned'] differs from this choice:", describe(tuned))
    print(f"total time {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
