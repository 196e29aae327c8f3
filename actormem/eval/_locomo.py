"""LoCoMo retrieval evaluation: the paper's protocol over the engine's BM25 index.

Theory of operation
-------------------
LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
ACL 2024) holds ten long two-person conversations with questions whose answers cite
*evidence* turns (``"D<session>:<turn>"``). Its Table 3 measures retrieval as follows, and
:func:`evaluate` does exactly this:

* each conversation is its own memory, searched only by its own questions;
* one *dialog unit* per turn, id = the turn's ``dia_id``, text
  ``{speaker} said, "{text}"`` plus `` and shared {blip_caption}`` when the turn has an image;
* the query is the question; recall@k of a question is the fraction of its (distinct)
  evidence ids among the ids of the top k units, 1 when it has none; ids are extracted
  with ``D\\d+:\\d+`` (some evidence strings are malformed);
* recall is averaged per category and over all questions, all five categories included.

A :class:`Retriever` says how a conversation is indexed and searched. Every variant goes
through :class:`~actormem.BM25Scorer`'s index (``add`` then ``top_k_terms``); the variants
only change the text each unit is indexed with (field weights, neighbouring turns) and
the query (pseudo-relevance feedback), or smooth the final ranking over neighbouring
turns. ``docs/retrieval.md`` reports each one.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from .._entry import MemoryCategory, MemoryEntry
from .._index.bm25 import BM25Index, BM25Scorer
from .._index.dense import DenseIndex, DenseScorer
from .._index.entrycols import new_entry_columns
from .._index.hybrid import HybridIndex, HybridScorer
from .._index.tokenize import Tokenizer, stop_words
from .._record import Record

__all__ = [
    "CATEGORIES",
    "DRAGON",
    "PLAIN_BM25",
    "RETRIEVERS",
    "Conversation",
    "DialogUnit",
    "EvalResult",
    "Question",
    "Retriever",
    "evaluate",
    "format_table",
    "load_locomo",
    "parse_evidence",
    "recall_at_k",
]

#: LoCoMo's question categories, by their number in the data.
CATEGORIES: dict[int, str] = {
    4: "single-hop",
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    5: "adversarial",
}

#: The paper's Table 3, retriever DRAGON, dialog units: recall % by k and category.
DRAGON: dict[int, dict[str, float]] = {
    5: {"single-hop": 68.0, "multi-hop": 35.4, "temporal": 70.4, "open-domain": 33.1,
        "adversarial": 43.9, "overall": 56.7},
    10: {"single-hop": 77.7, "multi-hop": 46.6, "temporal": 77.3, "open-domain": 40.8,
         "adversarial": 54.7, "overall": 66.2},
    25: {"single-hop": 87.1, "multi-hop": 62.5, "temporal": 83.5, "open-domain": 52.6,
         "adversarial": 66.3, "overall": 76.7},
    50: {"single-hop": 91.1, "multi-hop": 73.0, "temporal": 89.6, "open-domain": 61.7,
         "adversarial": 72.5, "overall": 82.7},
}  # fmt: skip

#: Plain BM25 (k1 1.5, b 0.75, lower-case alphanumeric tokens), overall recall % by k,
#: as the data's README gives it: the line BM25Scorer must reach.
PLAIN_BM25: dict[int, float] = {5: 45.7, 10: 53.3, 25: 62.6, 50: 70.4}

#: Conversations whose results may guide a choice of settings; the others are held out.
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44")
HELD_OUT = ("conv-47", "conv-48", "conv-49", "conv-50")

_EVIDENCE = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)")
_SESSION_TIME = "%I:%M %p on %d %B, %Y"


@attrs.frozen(kw_only=True)
class DialogUnit:
    """One turn of a conversation.

    Attributes:
        id: The turn's ``dia_id``, e.g. ``"D3:14"``.
        speaker: Who speaks.
        text: What they say.
        caption: The BLIP caption of the image they share, or ``None``.
        session: Session number (from the ``session_<n>`` key).
        when: When the session took place, from its ``session_<n>_date_time`` key
            (``"1:56 pm on 8 May, 2023"``, read as UTC), or ``None`` when it has none or
            it does not parse. Not part of the unit's text.
    """

    id: str
    speaker: str
    text: str
    caption: str | None
    session: int
    when: datetime | None = None

    def render(self) -> str:
        """The paper's unit text: ``{speaker} said, "{text}"`` (+ `` and shared {caption}``)."""
        out = f'{self.speaker} said, "{self.text}"'
        if self.caption:
            out += f" and shared {self.caption}"
        return out


@attrs.frozen(kw_only=True)
class Question:
    """A question, its evidence ids (distinct, in order) and its category number."""

    question: str
    evidence: tuple[str, ...]
    category: int


@attrs.frozen(kw_only=True)
class Conversation:
    """One LoCoMo sample: its id, its units in order, its questions."""

    sample_id: str
    units: tuple[DialogUnit, ...]
    questions: tuple[Question, ...]


def parse_evidence(items: Sequence[str]) -> tuple[str, ...]:
    """The distinct ids matching ``D\\d+:\\d+`` in ``items``, in order of appearance.

    ``["D8:6; D9:17", "D"]`` gives ``("D8:6", "D9:17")``. O(total length).
    """
    seen: dict[str, None] = {}
    for item in items:
        for match in _EVIDENCE.findall(str(item)):
            seen[match] = None
    return tuple(seen)


def _session_time(text: object) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime, ``None`` if absent or malformed."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text.strip(), _SESSION_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read ``locomo10.json`` into :class:`Conversation` values.

    Sessions are read from the ``session_<n>`` keys in numeric order (some date keys have
    no session). O(size of the file).

    Raises:
        OSError: The file cannot be read.
        ValueError: It is not LoCoMo-shaped JSON (the message says what is missing).
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deep") from None
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of LoCoMo samples")
    out = []
    for sample in raw:
        try:
            conv = sample["conversation"]
            sessions = sorted(
                (int(m.group(1)), key) for key in conv if (m := _SESSION.fullmatch(key)) is not None
            )
            units = tuple(
                DialogUnit(
                    id=turn["dia_id"],
                    speaker=turn["speaker"],
                    text=turn["text"],
                    caption=turn.get("blip_caption") or None,
                    session=number,
                    when=_session_time(conv.get(f"{key}_date_time")),
                )
                for number, key in sessions
                for turn in conv[key]
            )
            questions = tuple(
                Question(
                    question=qa["question"],
                    evidence=parse_evidence(qa.get("evidence") or ()),
                    category=int(qa["category"]),
                )
                for qa in sample["qa"]
            )
            out.append(
                Conversation(sample_id=sample["sample_id"], units=units, questions=questions)
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a LoCoMo sample ({exc!r} missing or mistyped)") from None
    return out


def recall_at_k(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Fraction of ``evidence`` ids among the first ``k`` of ``ranked``; 1.0 if no evidence."""
    if not evidence:
        return 1.0
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


@attrs.frozen(kw_only=True)
class Retriever:
    """How to index a conversation and search it; every field but ``scorer`` is optional.

    Attributes:
        name: Short id for reports and ``--scorer``.
        scorer: The :class:`~actormem.BM25Scorer` configuration, or a
            :class:`~actormem.DenseScorer` or :class:`~actormem.HybridScorer` (then the
            query expansion and smoothing fields must keep their defaults).
        speaker_weight: Times the ``"{speaker} said,"`` part is indexed (0 drops it).
        text_weight: Times the turn's own text is indexed.
        caption_weight: Times ``"and shared {caption}"`` is indexed (0 drops it).
        context: Number of turns on each side, in the same session, whose text is also
            indexed with the unit (neighbouring-turn document expansion).
        context_weight: Times each neighbour's text is indexed.
        prf_docs: RM3 pseudo-relevance feedback: how many top units feed the expansion
            (0: none). Lavrenko & Croft 2001 (RM1) with the RM3 interpolation of
            Abdul-Jaleel et al. 2004: ``q' = (1 - prf_weight) q / |q| + prf_weight RM1``,
            RM1 weights ``sum_d score_d / sum score * tf(w, d) / |d|`` over the top units,
            keeping the ``prf_terms`` heaviest.
        prf_terms: Expansion terms kept.
        prf_weight: Weight of the expansion, in [0, 1].
        smooth: Ranking smoothing over neighbours: a unit's final score is its score plus
            ``smooth`` times the scores of the turns right before and after it in its
            session (from the top ``smooth_depth``); 0 disables it.
        smooth_depth: How many first-pass results the smoothing reads.
        dated: Store each unit with ``created_at`` = its session's time (as an agent
            storing the turn when it was said would), instead of one fixed instant. Only
            a scorer that reads ``created_at`` sees it (the hybrid's date bonus,
            BM25's recency when a half-life is set); the indexed text is unchanged.
    """

    name: str
    scorer: BM25Scorer | DenseScorer | HybridScorer = attrs.field(factory=BM25Scorer)
    speaker_weight: int = 1
    text_weight: int = 1
    caption_weight: int = 1
    context: int = 0
    context_weight: int = 1
    prf_docs: int = 0
    prf_terms: int = 10
    prf_weight: float = 0.5
    smooth: float = 0.0
    smooth_depth: int = 200
    dated: bool = False

    def document(self, units: Sequence[DialogUnit], i: int) -> str:
        """The text unit ``i`` of ``units`` is indexed with. O(context * unit length)."""
        unit = units[i]
        if (self.speaker_weight, self.text_weight, self.caption_weight, self.context) == (
            1, 1, 1, 0,
        ):  # fmt: skip
            return unit.render()  # the paper's text, byte for byte
        parts = [f"{unit.speaker} said,"] * self.speaker_weight
        parts += [unit.text] * self.text_weight
        if unit.caption:
            parts += [f"and shared {unit.caption}"] * self.caption_weight
        for j in range(i - self.context, i + self.context + 1):
            if j != i and 0 <= j < len(units) and units[j].session == unit.session:
                parts += [units[j].text] * self.context_weight
        return " ".join(parts)


class _Everything:
    """A read view in which every record is visible (one static conversation)."""

    version = 1

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def visible(self, rec: Record) -> bool:
        return True

    def by_relevance(  # pragma: no cover - unused by BM25
        self, below: float | None = None
    ) -> Iterator[Record]:
        return iter(())


_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


class _ConversationIndex:
    """One conversation's units in a BM25 index, searched the way a Retriever says."""

    def __init__(self, retriever: Retriever, conversation: Conversation) -> None:
        self.retriever = retriever
        self.units = conversation.units
        self.index: BM25Index | DenseIndex | HybridIndex = retriever.scorer.make_index()
        self.position: dict[Record, int] = {}
        documents = [retriever.document(self.units, i) for i in range(len(self.units))]
        if not isinstance(self.index, BM25Index):
            todo = self.index.missing(documents)  # embedded in one batch
            self.index.offer(todo, self.index.embed(todo))
        cols = new_entry_columns()
        for i in range(len(self.units)):
            when = self.units[i].when if retriever.dated else None
            entry = MemoryEntry(
                category=MemoryCategory.FACT, memory=documents[i], created_at=when or _EPOCH
            )
            rec = Record(entry, born=1, seq=i, cols=cols)
            self.index.add(rec)
            self.position[rec] = i
        self.view = _Everything(len(self.units))

    def search(self, question: str, limit: int) -> list[str]:
        """Unit ids, best first, at most ``limit``."""
        r = self.retriever
        if not isinstance(self.index, BM25Index):
            found = self.index.top_k(self.view, question, limit, None)
            return [self.units[self.position[rec]].id for _, rec in found]
        weights: dict[str, float] = dict(Counter(self.index.tokenize(question)))
        depth = max(limit, r.smooth_depth) if r.smooth else limit
        if r.prf_docs:
            first = self.index.top_k_terms(self.view, weights, r.prf_docs, None)
            weights = self._rm3(weights, first)
        hits = self.index.top_k_terms(self.view, weights, depth, None)
        if not r.smooth:
            return [self.units[self.position[rec]].id for _, rec in hits]
        score = {self.position[rec]: s for s, rec in hits}
        smoothed = []
        for i, s in score.items():
            total = s
            for j in (i - 1, i + 1):
                if j in score and self.units[j].session == self.units[i].session:
                    total += r.smooth * score[j]
            smoothed.append((-total, i))
        smoothed.sort()
        return [self.units[i].id for _, i in smoothed[:limit]]

    def _rm3(
        self, weights: Mapping[str, float], first: list[tuple[float, Record]]
    ) -> dict[str, float]:
        r = self.retriever
        assert isinstance(self.index, BM25Index)
        mass = sum(s for s, _ in first)
        if not first or mass <= 0:
            return dict(weights)
        model: dict[str, float] = {}
        for s, rec in first:
            tfs = self.index.document_terms(rec)
            length = sum(tfs.values())
            for term, tf in tfs.items():
                model[term] = model.get(term, 0.0) + (s / mass) * tf / length
        heaviest = sorted(model.items(), key=lambda item: (-item[1], item[0]))
        expansion = dict(heaviest[: r.prf_terms])
        exp_mass = sum(expansion.values())
        q_mass = sum(weights.values())
        out: dict[str, float] = {}
        for term, w in weights.items():
            out[term] = (1.0 - r.prf_weight) * w / q_mass
        for term, w in expansion.items():
            out[term] = out.get(term, 0.0) + r.prf_weight * w / exp_mass
        return out


@attrs.frozen(kw_only=True)
class EvalResult:
    """Recall of one run.

    Attributes:
        retriever: The retriever's name.
        ks: The cut-offs, ascending.
        questions: Number of questions per category name and ``"overall"``.
        recall: ``recall[group][k]`` in percent, ``group`` a category name or
            ``"overall"``.
        per_conversation: ``{sample_id: {k: overall recall %}}``.
        conversations: The sample ids evaluated, in order.
        seconds: Wall-clock time of indexing and searching.
    """

    retriever: str
    ks: tuple[int, ...]
    questions: dict[str, int]
    recall: dict[str, dict[int, float]]
    per_conversation: dict[str, dict[int, float]]
    conversations: tuple[str, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, with the DRAGON and plain-BM25 reference figures."""
        return {
            "retriever": self.retriever,
            "k": list(self.ks),
            "conversations": list(self.conversations),
            "questions": self.questions,
            "recall": {g: {str(k): v for k, v in r.items()} for g, r in self.recall.items()},
            "per_conversation": {
                c: {str(k): v for k, v in r.items()} for c, r in self.per_conversation.items()
            },
            "dragon": {str(k): v for k, v in DRAGON.items() if k in self.ks},
            "plain_bm25": {str(k): v for k, v in PLAIN_BM25.items() if k in self.ks},
            "seconds": round(self.seconds, 3),
        }


def evaluate(
    conversations: Sequence[Conversation],
    retriever: Retriever | None = None,
    ks: Sequence[int] = (5, 10, 25, 50),
) -> EvalResult:
    """Run the paper's retrieval protocol (see the module docstring).

    Args:
        conversations: From :func:`load_locomo`, possibly a subset.
        retriever: How to index and search; plain BM25 over the paper's unit text when
            ``None``.
        ks: Cut-offs (each >= 1).

    Returns:
        An :class:`EvalResult`; a group with no question has no entry in ``recall``.

    Raises:
        ValueError: A k below 1, or no cut-off at all.

    Runtime complexity: O(units * unit length) to index plus one top-k search (two with
    pseudo-relevance feedback) per question.
    """
    if retriever is None:
        retriever = RETRIEVERS["bm25"]()
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError(f"every k must be >= 1, got {ks!r}")
    start = time.perf_counter()
    sums: dict[str, list[float]] = {}
    counts: Counter[str] = Counter()
    per_conversation: dict[str, dict[int, float]] = {}
    for conversation in conversations:
        index = _ConversationIndex(retriever, conversation)
        conv_sums = [0.0] * len(ks)
        for q in conversation.questions:
            ranked = index.search(q.question, ks[-1])
            values = [recall_at_k(ranked, q.evidence, k) for k in ks]
            for group in (CATEGORIES.get(q.category, f"category-{q.category}"), "overall"):
                acc = sums.setdefault(group, [0.0] * len(ks))
                for j, value in enumerate(values):
                    acc[j] += value
                counts[group] += 1
            for j, value in enumerate(values):
                conv_sums[j] += value
        n = len(conversation.questions)
        per_conversation[conversation.sample_id] = {
            k: 100.0 * conv_sums[j] / n if n else math.nan for j, k in enumerate(ks)
        }
    recall = {
        group: {k: 100.0 * acc[j] / counts[group] for j, k in enumerate(ks)}
        for group, acc in sums.items()
    }
    return EvalResult(
        retriever=retriever.name,
        ks=ks,
        questions=dict(counts),
        recall=recall,
        per_conversation=per_conversation,
        conversations=tuple(c.sample_id for c in conversations),
        seconds=time.perf_counter() - start,
    )


def format_table(result: EvalResult) -> str:
    """A text table of ``result`` with the paper's DRAGON figures beside ours."""
    groups = [name for name in CATEGORIES.values() if name in result.recall] + ["overall"]
    head = f"{'k':>4}  " + "  ".join(f"{g:>17}" for g in groups)
    sub = f"{'':>4}  " + "  ".join(f"{'ours':>8} {'DRAGON':>8}" for _ in groups)
    lines = [
        f"LoCoMo retrieval, dialog units, recall % -- retriever {result.retriever}, "
        f"{len(result.conversations)} conversation(s), {result.questions.get('overall', 0)} "
        "questions",
        head,
        sub,
    ]
    for k in result.ks:
        cells = []
        for g in groups:
            ref = DRAGON.get(k, {}).get(g)
            cells.append(f"{result.recall[g][k]:8.1f} {'' if ref is None else f'{ref:.1f}':>8}")
        lines.append(f"{k:>4}  " + "  ".join(cells))
    plain = "  ".join(f"@{k} {PLAIN_BM25[k]:.1f}" for k in result.ks if k in PLAIN_BM25)
    if plain:
        lines.append(f"plain BM25 reference, overall: {plain}")
    lines.append("questions: " + ", ".join(f"{g} {result.questions[g]}" for g in groups))
    lines.append(f"time: {result.seconds:.2f} s")
    return "\n".join(lines)


def _plain() -> Retriever:
    return Retriever(name="bm25")


def _stemmed() -> Retriever:
    tokenizer = Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk"))
    return Retriever(name="bm25-stem", scorer=BM25Scorer(k1=0.6, b=0.1, tokenizer=tokenizer))


def _tuned() -> Retriever:
    tokenizer = Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk"))
    return Retriever(
        name="bm25-tuned",
        scorer=BM25Scorer(k1=1.5, b=0.5, tokenizer=tokenizer),
        speaker_weight=2,
        text_weight=3,
        context=2,
    )


def _dense() -> Retriever:
    return Retriever(name="dense", scorer=DenseScorer())


def _hybrid() -> Retriever:
    tuned = _tuned()
    assert isinstance(tuned.scorer, BM25Scorer)
    return attrs.evolve(
        tuned,
        name="hybrid",
        scorer=HybridScorer(bm25=tuned.scorer, dense=DenseScorer()),
        dated=True,
    )


#: Named retrievers for ``actormem eval locomo --scorer NAME``, built on demand (the
#: stemmed ones need PyStemmer and bm25s). Chosen on the tuning conversations by
#: ``stress/retrieval_experiments.py``; see docs/retrieval.md.
#:
#: * ``bm25``: plain BM25 over the paper's unit text (the reference line);
#: * ``bm25-stem``: Snowball stemming and NLTK's stop words, k1 0.6, b 0.1;
#: * ``bm25-tuned``: as ``bm25-stem`` plus speaker x2, own text x3 and two neighbouring
#:   turns on each side in each unit's indexed text, k1 1.5, b 0.5;
#: * ``dense``: WordLlama over the paper's unit text;
#: * ``hybrid``: ``bm25-tuned`` and WordLlama on the same text, ``HybridScorer``'s
#:   defaults (convex fusion, date bonus), each unit stored with ``created_at`` = its
#:   session's time (``Retriever.dated``).
RETRIEVERS: dict[str, Callable[[], Retriever]] = {
    "bm25": _plain,
    "bm25-stem": _stemmed,
    "bm25-tuned": _tuned,
    "dense": _dense,
    "hybrid": _hybrid,
}
