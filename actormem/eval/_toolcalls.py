"""Tool-call memory recall: does retrieving with what an agent has at a turn find what
the same task's other runs did?

Theory of operation
-------------------
tau-bench runs each task in several independent *trials* (episodes ``task<T>-trial<R>``
in ``tool_calls.jsonl``, ``source`` starting with ``tau-bench``). A memory that stores
tool calls (as the agent hooks do) should, during trial ``R`` of task ``T``, bring back
the steps that other trials of ``T`` took: those are the *relevant* memories.
:func:`evaluate` measures that, through the engine (a :class:`MemoryState` per scorer,
every entry stored by the owner-side code, retrieves through ``run_retrieve``):

* one memory holds every tau-bench step of every task, one entry per step, text
  ``tool={tool}; input={input as compact JSON}; result={result}`` (input and result cut
  to 500 code points: the shape of the agent hooks' trajectory entries), namespace
  ``("tau-bench", task, trial)``;
* for every step of a trial whose task has another trial, two queries: ``result``, the
  previous step's tool result (what the agent has in hand before the call; the first
  step has none and is skipped), and ``input``, the step's own tool name and input;
* a query searches every entry except its own trial's (a namespace filter): the other
  tasks' steps are the distractors;
* ``hit@k`` (the "recall@k" of the tables): the fraction of queries with at least one
  relevant entry in the top k; MRR: the mean of 1 / rank of the first relevant entry
  (0 beyond rank 100). With a task's other trials holding 5-40 steps, a fraction of
  relevant entries found would be capped far below 1 at k = 1 and 3, so the useful
  question is whether *any* comes back;
* tasks 0-34 are the tuning split, 35-49 held out (by task id, so no task is in both).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from .._engine.snapshot import run_retrieve
from .._engine.state import DEFAULT_HALF_LIFE, MemoryState
from .._entry import MemoryCategory, MemoryEntry
from .._index.bm25 import BM25Scorer
from .._index.dense import DenseScorer, entry_document
from .._index.hybrid import HybridScorer
from .._index.scoring import Scorer
from .._index.tokenize import Tokenizer, stop_words
from .._index.wordoverlap import WordOverlapScorer
from .._record import Record

__all__ = [
    "HELD_OUT_FROM",
    "KS",
    "SCORERS",
    "Step",
    "ToolCallResult",
    "evaluate",
    "format_table",
    "load_steps",
]

#: Cut-offs reported.
KS = (1, 3, 10)
#: Tasks with this id or above are held out.
HELD_OUT_FROM = 35
#: Depth searched for the MRR.
_DEPTH = 100
_PART = 500
_EPISODE = re.compile(r"task(\d+)-trial(\d+)")
_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


@attrs.frozen(kw_only=True)
class Step:
    """One tau-bench tool call: its task, trial, position, tool, input (JSON) and result."""

    task: int
    trial: int
    step: int
    tool: str
    input: Any
    result: str

    def text(self) -> str:
        """The entry text: ``tool=...; input=...; result=...`` (parts cut to 500)."""
        encoded = json.dumps(self.input, separators=(",", ":"), sort_keys=True)
        return f"tool={self.tool}; input={_cut(encoded)}; result={_cut(self.result)}"


def _cut(text: str) -> str:
    return text if len(text) <= _PART else text[:_PART] + "…"


def load_steps(path: str | Path) -> list[Step]:
    """The tau-bench rows of ``tool_calls.jsonl``, by task, trial and step.

    Raises:
        OSError: The file cannot be read.
        ValueError: A line is not JSON or a tau-bench row lacks a field (the message
            names the line).
    """
    out = []
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not str(row["source"]).startswith("tau-bench"):
                    continue
                match = _EPISODE.fullmatch(row["episode"])
                if match is None:
                    raise ValueError(f"episode {row['episode']!r} is not task<T>-trial<R>")
                out.append(
                    Step(
                        task=int(match.group(1)),
                        trial=int(match.group(2)),
                        step=int(row["step"]),
                        tool=str(row["tool"]),
                        input=row["input"],
                        result=str(row["result"]),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                why = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ValueError(f"{path}:{number}: not a tool-call row ({why})") from None
    out.sort(key=lambda s: (s.task, s.trial, s.step))
    return out


@attrs.frozen(kw_only=True)
class ToolCallResult:
    """Figures of one scorer: ``hit[split][query kind][k]`` and ``mrr[split][kind]`` in
    percent, ``queries[split][kind]`` counts, and the wall-clock seconds."""

    scorer: str
    hit: dict[str, dict[str, dict[int, float]]]
    mrr: dict[str, dict[str, float]]
    queries: dict[str, dict[str, int]]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "scorer": self.scorer,
            "hit": {
                s: {q: {str(k): v for k, v in r.items()} for q, r in kinds.items()}
                for s, kinds in self.hit.items()
            },
            "mrr": self.mrr,
            "queries": self.queries,
            "seconds": round(self.seconds, 3),
        }


def _build(scorer: Scorer, steps: Sequence[Step]) -> tuple[MemoryState, dict[Record, Step]]:
    state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=scorer)
    entries = [
        MemoryEntry(
            category=MemoryCategory.TRAJECTORY,
            memory=s.text(),
            namespace=("tau-bench", f"task{s.task}", f"trial{s.trial}"),
            created_at=_EPOCH,
        )
        for s in steps
    ]
    index: Any = state.index
    if hasattr(index, "missing"):  # vectors in one batch, as the owner does
        todo = index.missing(entry_document(e) for e in entries)
        index.offer(todo, index.embed(todo))
    of: dict[Record, Step] = {}
    for entry, s in zip(entries, steps, strict=True):
        of[state.store(entry).record] = s
    state.publish()
    return state, of


def evaluate(steps: Sequence[Step], scorer: Scorer, name: str | None = None) -> ToolCallResult:
    """Run the protocol of the module docs with ``scorer``.

    Runtime complexity: n stores plus 2n retrieves of depth 100 for n steps.
    """
    start = time.perf_counter()
    state, of = _build(scorer, steps)
    view = state.view()
    trials: dict[int, set[int]] = {}
    for s in steps:
        trials.setdefault(s.task, set()).add(s.trial)
    sums: dict[tuple[str, str], list[float]] = {}
    counts: dict[tuple[str, str], int] = {}
    previous: Step | None = None
    for s in steps:
        prev = (
            previous if previous and (previous.task, previous.trial) == (s.task, s.trial) else None
        )
        previous = s
        if len(trials[s.task]) < 2:
            continue
        split = "held-out" if s.task >= HELD_OUT_FROM else "tuning"
        own = f"trial{s.trial}"
        task = f"task{s.task}"

        def accept(rec: Record, task: str = task, own: str = own) -> bool:
            ns: tuple[str, ...] = rec.cols.get(rec.slot, "namespace")
            return ns[1] != task or ns[2] != own

        queries = {"input": f"{s.tool} {json.dumps(s.input, sort_keys=True)}"}
        if prev is not None:
            queries["result"] = _cut(prev.result)
        for kind, query in queries.items():
            hits = run_retrieve(state, view, query, _DEPTH, accept)
            rank = next((i for i, (_, rec) in enumerate(hits, 1) if of[rec].task == s.task), None)
            acc = sums.setdefault((split, kind), [0.0] * (len(KS) + 1))
            counts[(split, kind)] = counts.get((split, kind), 0) + 1
            for j, k in enumerate(KS):
                acc[j] += 1.0 if rank is not None and rank <= k else 0.0
            acc[-1] += 0.0 if rank is None else 1.0 / rank
    hit: dict[str, dict[str, dict[int, float]]] = {}
    mrr: dict[str, dict[str, float]] = {}
    queries_out: dict[str, dict[str, int]] = {}
    for (split, kind), acc in sorted(sums.items()):
        n = counts[(split, kind)]
        hit.setdefault(split, {})[kind] = {k: 100.0 * acc[j] / n for j, k in enumerate(KS)}
        mrr.setdefault(split, {})[kind] = 100.0 * acc[-1] / n
        queries_out.setdefault(split, {})[kind] = n
    return ToolCallResult(
        scorer=name or scorer.name,
        hit=hit,
        mrr=mrr,
        queries=queries_out,
        seconds=time.perf_counter() - start,
    )


def format_table(results: Sequence[ToolCallResult]) -> str:
    """One line per scorer, split and query kind: hit@1/3/10 and MRR, in percent."""
    lines = [
        "tau-bench tool-call memory recall, % (hit@k: a query with a relevant step of the "
        "same task's other trials in the top k; MRR x 100)",
        f"{'scorer':<13} {'split':<9} {'query':<7} {'queries':>7} "
        + " ".join(f"{'@' + str(k):>6}" for k in KS)
        + f" {'MRR':>6}",
    ]
    for r in results:
        for split in ("tuning", "held-out"):
            for kind in ("result", "input"):
                if kind not in r.hit.get(split, {}):
                    continue
                cells = " ".join(f"{r.hit[split][kind][k]:6.1f}" for k in KS)
                lines.append(
                    f"{r.scorer:<13} {split:<9} {kind:<7} {r.queries[split][kind]:>7} "
                    f"{cells} {r.mrr[split][kind]:6.1f}"
                )
    lines.append("time: " + ", ".join(f"{r.scorer} {r.seconds:.1f} s" for r in results))
    return "\n".join(lines)


def _tuned_bm25() -> BM25Scorer:
    tokenizer = Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk"))
    return BM25Scorer(k1=1.5, b=0.5, tokenizer=tokenizer)


#: Scorers by name for ``actormem eval toolcalls --scorer``; built on demand (the tuned
#: ones need PyStemmer and bm25s, the dense ones wordllama).
SCORERS: dict[str, Callable[[], Scorer]] = {
    "word-overlap": WordOverlapScorer,
    "bm25": BM25Scorer,
    "bm25-tuned": _tuned_bm25,
    "dense": DenseScorer,
    "hybrid": lambda: HybridScorer(bm25=_tuned_bm25(), dense=DenseScorer()),
}
