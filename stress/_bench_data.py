"""Real texts and queries for the benchmarks, and memories built from them.

Entries are the texts of ``../shared/data/`` as actormem would store them:

* each tool call of ``tool_calls.jsonl`` as a trajectory entry (``format_trajectory``,
  the text the agent hooks write: ``tool=...; input=...; result=...``, parts cut at 500);
* each LoCoMo turn as the paper's dialog unit (``{speaker} said, "{text}"``).

That is 7,517 texts. A memory of ``n`` entries cycles them in a fixed, seeded order, each
entry with its own UUID (``uuid.UUID(int=i + 1)``: distinct and reproducible).

Cycling verbatim would give a 1M-entry memory only 7,517 distinct texts, each 133 times:
an index that shares work between equal texts would then look far better than it would
on a real memory, where texts rarely repeat. So, as ``../shared/data/README.md`` says
("vary the episode id"), every text starts with the id of its episode (tool calls) or
conversation session (LoCoMo) and the cycle number, ``episode=task3-trial0.7; tool=...``
or ``session=conv-26-s4.7; Caroline said, "..."``: the texts stay real, every cycle's
are distinct, and the markers add what real entries carry anyway, ids (one new token per
episode and cycle). ``load_corpus(marked=False)`` cycles the texts verbatim instead.

Queries are the 1,986 LoCoMo questions, in a seeded order; :func:`query_sets` adds the
results of the tool calls as queries (what the swarm's agents retrieve with).
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path

from actormem import MemoryCategory, MemoryEntry, format_trajectory
from actormem.eval._locomo import load_locomo

__all__ = [
    "DEFAULT_DATA",
    "Corpus",
    "entries",
    "load_corpus",
    "query_sets",
    "tool_result_queries",
]

#: ``../shared/data`` seen from the project root (where ``python -m stress.bench`` runs).
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

#: Creation times are spread one second apart from here, so every entry is distinct in
#: time too and the eviction order is well defined.
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


class Corpus:
    """The texts (category, marker, text) and the queries, both seeded-shuffled."""

    def __init__(
        self,
        texts: Sequence[tuple[MemoryCategory, str, str]],
        queries: Sequence[str],
        marked: bool = True,
    ) -> None:
        self.texts = list(texts)
        self.queries = list(queries)
        #: Whether :func:`entries` marks each text with its episode and cycle.
        self.marked = marked

    @property
    def mean_text_chars(self) -> float:
        """Mean length of the texts without their markers."""
        return sum(len(t) for _, _, t in self.texts) / len(self.texts)

    def text(self, i: int) -> tuple[MemoryCategory, str]:
        """The category and text of entry number ``i`` (0-based). O(len(text))."""
        m = len(self.texts)
        category, marker, text = self.texts[i % m]
        if self.marked:
            text = f"{marker}.{i // m}; {text}"
        return category, text


@lru_cache(maxsize=4)
def load_corpus(
    data_dir: str | os.PathLike[str] = DEFAULT_DATA, seed: int = 0, marked: bool = True
) -> Corpus:
    """Read the tool calls and LoCoMo turns and questions; shuffle both with ``seed``.

    Raises:
        OSError: A data file is missing (point ``--data`` at your copy).
    """
    data = Path(data_dir)
    texts: list[tuple[MemoryCategory, str, str]] = []
    with open(data / "tool_calls.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(
                (
                    MemoryCategory.TRAJECTORY,
                    f"episode={row['episode']}",
                    format_trajectory(row["tool"], row["input"], row["result"]),
                )
            )
    queries: list[str] = []
    for conv in load_locomo(data / "locomo10.json"):
        texts.extend(
            (MemoryCategory.FACT, f"session={conv.sample_id}-s{unit.session}", unit.render())
            for unit in conv.units
        )
        queries.extend(q.question for q in conv.questions)
    rng = random.Random(seed)
    rng.shuffle(texts)
    rng.shuffle(queries)
    return Corpus(texts, queries, marked)


def entries(corpus: Corpus, n: int, *, start: int = 0) -> Iterator[MemoryEntry]:
    """``n`` entries cycling the corpus texts, ids ``start + 1 .. start + n``. O(n).

    Marked texts are new ``str`` objects, one per entry (as entries arriving from outside
    have); verbatim cycles share the corpus's text objects.
    """
    for i in range(start, start + n):
        category, text = corpus.text(i)
        yield MemoryEntry(
            category=category,
            memory=text,
            id=uuid.UUID(int=i + 1),
            created_at=EPOCH + timedelta(seconds=i),
        )


def tool_result_queries(data: Path, count: int, seed: int) -> list[str]:
    """``count`` tool results of ``tool_calls.jsonl`` as query strings, seeded order
    (JSON results serialized with ``json.dumps``). O(file size).

    Raises:
        OSError: ``tool_calls.jsonl`` is missing.
    """
    with open(data / "tool_calls.jsonl", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    random.Random(seed).shuffle(rows)
    out = []
    for row in rows[:count]:
        result = row["result"]
        out.append(result if isinstance(result, str) else json.dumps(result))
    return out


def query_sets(corpus: Corpus, data: Path, count: int, seed: int) -> dict[str, list[str]]:
    """The two query sets of the A/B benchmarks, ``count`` queries each:
    ``questions`` (LoCoMo, about 10 words) and ``tool results``
    (:func:`tool_result_queries`: median 59 words, up to 24,000 characters of JSON)."""
    return {
        "questions": corpus.queries[:count],
        "tool results": tool_result_queries(data, count, seed),
    }
