"""A dense (embedding) index: exact cosine top-k over a float32 matrix.

Theory of operation
-------------------
An *embedder* is any callable from a list of texts to an ``(n, dim)`` array of vectors
(:class:`Embedder`); :func:`wordllama_embedder` wraps WordLlama, whose weights ship
inside its PyPI wheel and load with no network. The document of an entry is its
``memory`` text followed by its tags (as for BM25), bookkeeping tags excepted
(:func:`entry_document`).

The index numbers each distinct document (a *row*) once, never reusing a number until a
compaction, and keeps its unit-length float32 vector in row ``r`` of ``_matrix``, the
records that carry it in ``_recs[r]``. Rows are appended; the matrix grows by doubling
into a *new* array, so a reader holding the old array keeps reading the prefix it saw.
A row whose last record is purged is dead; once half of the rows (and at least
:data:`_COMPACT_MIN`) are dead the owner copies the live rows into new arrays
(compaction), again replacing, never editing, what readers hold.

Multi-version concurrency control is the engine's: a reader only keeps the records
visible at its version (``rec.born <= version < rec.died``); records are purged only
once no snapshot can see them.

Vectors come from, in order: the index's cache of vectors computed ahead of time
(:meth:`DenseIndex.offer`, filled by the owner from a worker thread, batched, before
it applies a batch of stores, see :func:`actormem._engine.memory`), vectors restored
from a file, or else an embedding on the spot (counted in :attr:`DenseIndex.inline`).

A retrieve embeds the query in the reader's task, then scores the rows it saw at its
start in chunks of :data:`_CHUNK` rows (one matrix-vector product each, a yield
between them), and visits rows in descending similarity, keeping the visible records
admitted by the filter in a heap of the ``limit`` best, until the next row's similarity
is below the worst kept.
"""

from __future__ import annotations

import copy
import hashlib
import heapq
import logging
import math
import os
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from .._entry import MemoryEntry
from .._errors import EmbeddingError
from .._record import Record
from .._util import Final, install_hint
from .scoring import Accept, ReadView, drain

__all__ = [
    "BOOKKEEPING_TAG_PREFIX",
    "DenseIndex",
    "DenseScorer",
    "Embedder",
    "FunctionEmbedder",
    "document_text",
    "entry_document",
    "text_hash",
    "wordllama_embedder",
]

#: Rows scored (one matrix-vector product, about 0.1 ms at 256 dimensions) between two
#: yields of ``top_k_steps``.
_CHUNK = 1024
#: Rows visited (records checked) between two yields.
_STEP = 128
#: Dead rows below which the owner never compacts.
_COMPACT_MIN = 1024
#: Vectors kept in the ahead-of-time cache at most (oldest dropped first), beyond those
#: of the latest offer, which are always kept (a batch's ``add`` calls need them all).
_OFFER_MAX = 65536
#: Texts per call of the embedder: :meth:`DenseIndex.embed` cuts a longer list into
#: calls of this many, which bounds the embedder's working memory (WordLlama gathers
#: one 1 KiB row per token of the call).
_EMBED_CHUNK = 1024


class Embedder(Protocol):
    """Texts to vectors: ``embedder(texts)`` returns an ``(len(texts), dim)`` array.

    ``name`` identifies the model (recorded with persisted vectors: a different name
    means the vectors are recomputed); ``dim`` is the vector length. The call must be a
    pure function of its argument and safe to run in a worker thread. It may fail (raise,
    or return a wrong shape or a NaN): the stores that needed it then fail with
    :class:`~actormem.EmbeddingError` and a later store calls it again. It is given at
    most 1,024 texts a call.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def __call__(self, texts: Sequence[str]) -> Any: ...


@attrs.frozen(kw_only=True)
class FunctionEmbedder(metaclass=Final):
    """An :class:`Embedder` from a plain function ``texts -> (n, dim) array``.

    Attributes:
        fn: The function (pure, thread-safe).
        name: The model's name, e.g. ``"my-model-v2"``.
        dim: Vector length, >= 1.
    """

    fn: Callable[[Sequence[str]], Any] = attrs.field(eq=False)
    name: str
    dim: int = attrs.field()

    @dim.validator
    def _check_dim(self, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"dim must be an int >= 1, got {value!r}")

    def __call__(self, texts: Sequence[str]) -> Any:
        return self.fn(texts)


_WORDLLAMA: dict[int, FunctionEmbedder] = {}


def wordllama_embedder(dim: int = 256) -> FunctionEmbedder:
    """WordLlama's ``l2_supercat`` static embeddings, loaded from the files inside the
    installed ``wordllama`` package (no download, no network).

    WordLlama (Lee Miller, MIT licence, https://github.com/dleemiller/WordLlama) averages
    token embeddings distilled from large language models' input embeddings (Llama 2
    family tokenizer): about 10 µs a short text on one core, numpy only. Loaded once per
    process per ``dim``.

    Args:
        dim: Truncation of the 256-dimensional vectors (64, 128 or 256; Matryoshka).

    Raises:
        ImportError: ``wordllama`` is not installed (the ``dense`` extra).
    """
    cached = _WORDLLAMA.get(dim)
    if cached is not None:
        return cached
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:  # pragma: no cover - depends on the environment
        # A ModuleNotFoundError naming wordllama, so that callers that map a missing
        # package to its extra (the CLI) print one line instead of a traceback.
        raise ModuleNotFoundError(
            f"the dense scorer's default model needs wordllama: {install_hint('dense')}",
            name="wordllama",
        ) from exc
    finally:
        # Importing wordllama configures the root logger (a stderr handler), which
        # changed how every program using actormem logs: undo that.
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    model = WordLlama.load(
        cache_dir=os.path.dirname(wordllama.__file__),
        disable_download=True,
        dim=256,
        trunc_dim=None if dim == 256 else dim,
    )

    tokenizer = copy.deepcopy(model.tokenizer)
    tokenizer.no_padding()  # a batch's texts are pooled one by one: no padding to the longest
    table = model.embedding  # (vocabulary, dim) float32
    top = table.shape[0] - 1

    def embed(texts: Sequence[str]) -> Any:
        """Mean of the texts' token vectors (WordLlama's average pooling), no padding.

        Each distinct (text, token) pair's row is gathered once and weighted by its
        count, then summed per text: O(tokens log tokens) for the sort plus O(pairs x
        dim) for the sums, where a text that repeats its tokens (a long JSON tool result)
        has far fewer pairs than tokens (a 100,000-character query: 0.33 -> 0.04 s, and
        the loop's stall while a worker thread embeds it 0.1-0.3 s -> ~0.02 s:
        docs/benchmarks.md, "Embedding long texts"). No BLAS call: a threaded matrix
        product spins on a second core that the event loop may need."""
        if not texts:
            return np.zeros((0, dim), np.float32)
        n = len(texts)
        encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encoded), np.int64, n)
        ids = np.fromiter((i for e in encoded for i in e.ids), np.int64, int(lengths.sum()))
        np.clip(ids, 0, top, out=ids)
        out = np.zeros((n, table.shape[1]), np.float32)
        filled = lengths > 0
        if ids.size:
            # One sort of the (text, token) pairs: each pair's row is gathered once (the
            # table is 32 MB; tokens repeat) and weighted by the pair's count.
            width = top + 1
            cell = np.repeat(np.arange(n, dtype=np.int64) * width, lengths) + ids
            pairs, counts = np.unique(cell, return_counts=True)  # by text, then token
            rows = table[pairs % width]
            if len(pairs) < len(ids):
                rows *= counts[:, None].astype(np.float32)
            if n == 1:
                sums = rows.sum(axis=0, keepdims=True)
            else:
                per = np.bincount(pairs // width, minlength=n)
                sums = np.add.reduceat(rows, (np.cumsum(per) - per)[filled], axis=0)
            out[filled] = sums / lengths[filled, None].astype(np.float32)
        return out[:, :dim]

    made = FunctionEmbedder(fn=embed, name=f"wordllama-l2_supercat-{dim}", dim=dim)
    _WORDLLAMA[dim] = made
    return made


#: Tags beginning with this are an integration's bookkeeping (the LangGraph adapter's
#: ``langgraph:index:<field>`` and ``langgraph:noindex``), not words about the entry:
#: :func:`entry_document` leaves them out.
BOOKKEEPING_TAG_PREFIX = "langgraph:"


def entry_document(entry: MemoryEntry) -> str:
    """The text an entry is embedded as: :func:`_document` of its memory and tags."""
    return _document(entry.memory, entry.tags)


def _document(text: str, tags: Sequence[str]) -> str:
    """``text``, then ``tags``, space-separated, except bookkeeping tags
    (:data:`BOOKKEEPING_TAG_PREFIX`). O(text + tags)."""
    if not tags:
        return text
    if any(t.startswith(BOOKKEEPING_TAG_PREFIX) for t in tags):
        tags = [t for t in tags if not t.startswith(BOOKKEEPING_TAG_PREFIX)]
        if not tags:
            return text
    return " ".join((text, *tags))


def text_hash(text: str) -> bytes:
    """16 bytes identifying ``text``: the BLAKE2b digest of its UTF-8 (surrogates kept)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def document_text(rec: Record) -> str:
    """:func:`entry_document` of ``rec``'s entry."""
    return entry_document(rec.entry)


def _unit_rows(vectors: Any, n: int, dim: int) -> np.ndarray[Any, Any]:
    """``vectors`` as a C-contiguous float32 ``(n, dim)`` array of unit rows (zero rows
    stay zero).

    Raises:
        ValueError: The shape is not ``(n, dim)`` or a value is not finite.
    """
    arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if arr.shape != (n, dim):
        raise ValueError(f"the embedder returned shape {arr.shape}, expected {(n, dim)}")
    if not np.isfinite(arr).all():
        raise ValueError("the embedder returned a vector with a NaN or infinite value")
    norms = np.linalg.norm(arr, axis=1)
    norms[norms == 0] = 1.0
    arr /= norms[:, None]
    return arr


@attrs.frozen(kw_only=True)
class DenseScorer(metaclass=Final):
    """Cosine similarity between embeddings of the query and of each entry.

    ``score(d) = cos(embed(query), embed(document(d)))``, in [-1, 1], with the document
    an entry's memory text then its tags. Every visible entry has a score, so a retrieve
    returns ``limit`` entries whenever that many are visible (ask for ``min_score=`` to
    keep only close ones; ``min_matched=`` is meaningless here and refused).

    Attributes:
        embedder: Texts to vectors (:class:`Embedder`); ``None`` (default) loads
            :func:`wordllama_embedder` when the index is made.
        inline_chars: With the built-in model (``embedder=None``), a batch of new texts
            totalling fewer characters than this is embedded by the owner itself, and a
            query shorter than this by the caller's task; longer ones go to a worker
            thread. A custom embedder always runs in a worker thread (it may be slow:
            a remote API, a transformer), see :meth:`DenseIndex.inline_ok`.

    The owner embeds new texts before applying each batch (see ``docs/design.md``). An
    embedder that raises there, or returns a wrong shape or a NaN, fails the stores of
    that batch that needed new vectors with :class:`~actormem.EmbeddingError` (nothing
    of theirs is stored); the other requests of the batch are applied, the memory stays
    usable, and a later store of the same text calls the embedder again. A retrieve
    embeds its query for the caller's task (in a worker thread unless the built-in
    model and a short query, see ``inline_chars``) and raises
    :class:`~actormem.EmbeddingError` there.

    Runtime complexity of a retrieve: one query embedding plus O(n * dim) multiply-adds
    for n distinct texts (exact search), plus O(V log k) for the V records visited.
    """

    embedder: Embedder | None = attrs.field(default=None, eq=False)
    inline_chars: int = 2048

    @property
    def name(self) -> str:
        """Short id for reports: ``"dense"``."""
        return "dense"

    def resolved(self) -> Embedder:
        """The embedder, loading the default one if none was given."""
        return self.embedder if self.embedder is not None else wordllama_embedder()

    def make_index(self) -> DenseIndex:
        """A new, empty :class:`DenseIndex`. O(1) (plus loading the default model once)."""
        return DenseIndex(self.resolved(), self.inline_chars)

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        """The cosine of ``query`` and the entry's document, from scratch."""
        emb = self.resolved()
        vecs = _unit_rows(emb([query, _document(entry_text, tags)]), 2, emb.dim)
        return float(vecs[0] @ vecs[1])


def _ranked(heap: list[tuple[float, int, Record]]) -> list[tuple[float, Record]]:
    heap.sort(key=lambda item: (-item[0], -item[1]))
    return [(score, rec) for score, _, rec in heap]


class DenseIndex:
    """Owner-written, snapshot-read exact cosine index (see the module docs)."""

    def __init__(self, embedder: Embedder, inline_chars: int = 2048) -> None:
        self.embedder = embedder
        #: Whether the embedder is the built-in model (fast, pure numpy): only it may be
        #: called on the event loop, and only for short texts (see :meth:`inline_ok`).
        self.builtin = any(embedder is e for e in _WORDLLAMA.values())
        self.dim = int(embedder.dim)
        self.inline_chars = inline_chars
        self._matrix: np.ndarray[Any, Any] = np.zeros((16, self.dim), np.float32)
        self._n = 0
        self._recs: list[list[Record] | None] = []
        self._row_of_text: dict[str, int] = {}
        self._row_of: dict[Record, int] = {}
        self._dead = 0
        self._offered: dict[str, np.ndarray[Any, Any]] = {}
        # Query vectors computed in a worker thread for retrieves under way:
        # {query: [vector, retrieves using it]} (see pin_query).
        self._pinned: dict[str, list[Any]] = {}
        #: Texts embedded on the spot by ``add`` (no vector offered ahead): statistics.
        self.inline = 0

    # -- owner side: vectors ahead of time ----------------------------------------------

    def missing(self, texts: Iterable[str]) -> list[str]:
        """The distinct texts among ``texts`` with no vector yet (neither indexed nor
        offered), in order. O(len(texts))."""
        out: dict[str, None] = {}
        for t in texts:
            if t not in self._row_of_text and t not in self._offered:
                out[t] = None
        return list(out)

    def inline_ok(self, texts: Sequence[str]) -> bool:
        """Whether ``texts`` may be embedded on the event loop: only by the built-in
        model, and only when they total fewer than ``inline_chars`` characters. Any
        custom embedder runs in a worker thread. O(len(texts))."""
        return self.builtin and sum(map(len, texts)) < self.inline_chars

    def query_index(self) -> DenseIndex:
        """The dense index a retrieve embeds its query with: this one (a hybrid index
        answers with its dense half). O(1)."""
        return self

    def pin_query(self, query: str, vector: np.ndarray[Any, Any]) -> None:
        """Use ``vector`` (from :meth:`embed`) for ``query`` in ``top_k_steps`` until as
        many :meth:`unpin_query` calls. O(1)."""
        pinned = self._pinned.get(query)
        if pinned is None:
            self._pinned[query] = [vector, 1]
        else:
            pinned[1] += 1

    def unpin_query(self, query: str) -> None:
        """Undo one :meth:`pin_query` of ``query``. O(1)."""
        pinned = self._pinned[query]
        pinned[1] -= 1
        if not pinned[1]:
            del self._pinned[query]

    def query_vector(self, query: str) -> np.ndarray[Any, Any]:
        """The unit vector of ``query``: the pinned one, else embedded now.

        Raises:
            EmbeddingError: See :meth:`embed`.
        """
        pinned = self._pinned.get(query)
        vec: np.ndarray[Any, Any] = pinned[0] if pinned is not None else self.embed([query])[0]
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """Unit vectors of ``texts``, one row each: pure, safe to call in a worker thread.
        The embedder is called once per :data:`_EMBED_CHUNK` texts.

        Raises:
            EmbeddingError: The embedder raised (an ``Exception`` or
                ``asyncio.CancelledError``; it is the ``__cause__``), or returned a wrong
                shape or a non-finite value.
        """
        texts = list(texts)
        if len(texts) <= _EMBED_CHUNK:
            return self._embed_chunk(texts)
        out = np.empty((len(texts), self.dim), np.float32)
        for start in range(0, len(texts), _EMBED_CHUNK):
            part = texts[start : start + _EMBED_CHUNK]
            out[start : start + len(part)] = self._embed_chunk(part)
        return out

    def _embed_chunk(self, texts: list[str]) -> np.ndarray[Any, Any]:
        import asyncio  # here, not at import (~9 ms): only its CancelledError is needed

        name = self.model_name
        try:
            got = self.embedder(texts)
        except EmbeddingError:
            raise
        except (Exception, asyncio.CancelledError) as exc:
            what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise EmbeddingError(
                f"the embedder {name!r} failed on {len(texts)} texts ({what})"
            ) from exc
        try:
            return _unit_rows(got, len(texts), self.dim)
        except ValueError as exc:
            raise EmbeddingError(f"the embedder {name!r}: {exc}") from None

    def offer(self, texts: Sequence[str], vectors: np.ndarray[Any, Any]) -> None:
        """Keep ``vectors`` (from :meth:`embed`, one row per text) for the ``add`` of a
        record with that document. Of the vectors offered earlier and not used yet, the
        oldest are dropped beyond :data:`_OFFER_MAX` in all; those of this offer are all
        kept, however many. O(len(texts) + dropped)."""
        offered = self._offered
        for text in texts:  # re-offered texts count as new: move them to the end
            offered.pop(text, None)
        for text, vec in zip(texts, vectors, strict=True):
            offered[text] = vec
        while len(offered) > max(_OFFER_MAX, len(texts)):
            del offered[next(iter(offered))]

    @property
    def model_name(self) -> str:
        """The embedder's name (recorded with persisted vectors)."""
        return str(self.embedder.name)

    def stored_vector(self, rec: Record) -> tuple[bytes, bytes] | None:
        """``(text_hash, float32 bytes)`` of ``rec``'s document, for the file, from the
        index's rows or the vectors offered ahead; None if it has none yet. O(dim)."""
        text = document_text(rec)
        row = self._row_of_text.get(text)
        if row is not None:
            vec = self._matrix[row]
        else:
            offered = self._offered.get(text)
            if offered is None:
                return None
            vec = offered
        return text_hash(text), np.asarray(vec, "<f4").tobytes()

    def offer_stored(self, texts: Sequence[str], blobs: Sequence[bytes]) -> list[str]:
        """Offer vectors read back from a file (float32 bytes, one per text); those not
        finite or of the wrong length are left out. Returns the texts offered. O(n dim)."""
        kept: list[str] = []
        rows: list[np.ndarray[Any, Any]] = []
        for text, blob in zip(texts, blobs, strict=True):
            if len(blob) != 4 * self.dim:
                continue
            vec = np.frombuffer(blob, "<f4").astype(np.float32)
            if np.isfinite(vec).all():
                kept.append(text)
                rows.append(vec)
        if kept:
            self.offer(kept, _unit_rows(np.stack(rows), len(kept), self.dim))
        return kept

    def vector_of(self, rec: Record) -> np.ndarray[Any, Any]:
        """The unit vector ``rec`` is indexed with (a copy). O(dim).

        Raises:
            KeyError: ``rec`` is not in the index.
        """
        return np.array(self._matrix[self._row_of[rec]])

    # -- owner side: the ScoringIndex lifecycle -----------------------------------------

    def add(self, rec: Record) -> None:
        """Index ``rec`` (see ``ScoringIndex``). O(dim), plus an embedding when its text
        has no row and no offered vector."""
        text = document_text(rec)
        row = self._row_of_text.get(text)
        if row is None:
            vec = self._offered.pop(text, None)
            if vec is None:
                try:
                    vec = self.embed([text])[0]
                except EmbeddingError as exc:
                    # Not a domain error here: the caller (the owner, mid-store) embeds
                    # ahead of time and catches failures there, before changing anything.
                    raise RuntimeError(f"embedding a text inline failed: {exc}") from exc
                self.inline += 1
            row = self._append(text, vec)
        recs = self._recs[row]
        assert recs is not None
        recs.append(rec)
        self._row_of[rec] = row

    def _append(self, text: str, vec: np.ndarray[Any, Any]) -> int:
        n = self._n
        if n == len(self._matrix):
            bigger = np.zeros((2 * n, self.dim), np.float32)
            bigger[:n] = self._matrix[:n]
            self._matrix = bigger  # replaced, not resized: readers keep the old one
        self._matrix[n] = vec
        self._recs.append([])
        self._row_of_text[text] = n
        self._n = n + 1
        return n

    def retire(self, rec: Record) -> None:
        """Nothing to do: readers filter by version. O(1)."""

    def purge(self, rec: Record) -> None:
        """Drop ``rec``; a row without records dies; compact when half are dead.
        Amortized O(dim)."""
        row = self._row_of.pop(rec)
        recs = self._recs[row]
        assert recs is not None
        recs.remove(rec)
        if not recs:
            self._recs[row] = None
            del self._row_of_text[document_text(rec)]
            self._dead += 1
            if self._dead >= _COMPACT_MIN and 2 * self._dead >= self._n:
                self._compact()

    def _compact(self) -> None:
        live = [r for r in range(self._n) if self._recs[r] is not None]
        matrix = np.zeros((max(16, 2 * len(live)), self.dim), np.float32)
        matrix[: len(live)] = self._matrix[live]
        recs: list[list[Record] | None] = []
        row_of_text: dict[str, int] = {}
        row_of: dict[Record, int] = {}
        for new, old in enumerate(live):
            group = self._recs[old]
            assert group is not None
            recs.append(list(group))
            row_of_text[document_text(group[0])] = new
            for rec in group:
                row_of[rec] = new
        self._matrix, self._recs, self._n, self._dead = matrix, recs, len(live), 0
        self._row_of_text, self._row_of = row_of_text, row_of

    # -- reader side --------------------------------------------------------------------

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """The ``limit`` records visible in ``view`` and admitted by ``accept`` whose
        documents are most similar to ``query`` (cosine), best first, ties by ``seq``."""
        return drain(self.top_k_steps(view, query, limit, accept))

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k` in slices (see ``scoring``): a yield after every
        :data:`_CHUNK` rows scored and every :data:`_STEP` rows visited."""
        if limit <= 0 or len(view) == 0:
            return []
        q = self.query_vector(query)
        sims = yield from self.similarities_steps(q)
        return (yield from self.best_steps(view, sims, limit, accept))

    def similarities_steps(
        self, q: np.ndarray[Any, Any]
    ) -> Generator[None, None, tuple[np.ndarray[Any, Any], list[list[Record] | None]]]:
        """Cosine of the unit vector ``q`` with every row there is now, in chunks; also
        returns the row-to-records table read (the one the rows' numbers refer to)."""
        matrix, recs, n = self._matrix, self._recs, self._n
        sims = np.empty(n, np.float32)
        for start in range(0, n, _CHUNK):
            end = min(n, start + _CHUNK)
            # einsum, not matmul: OpenBLAS's threaded gemv was 20 times slower on a
            # loaded 2-core machine (docs/benchmarks.md); this loop uses one core.
            np.einsum("ij,j->i", matrix[start:end], q, out=sims[start:end])
            yield
        return sims, recs

    def best_steps(
        self,
        view: ReadView,
        scored: tuple[np.ndarray[Any, Any], list[list[Record] | None]],
        limit: int,
        accept: Accept,
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """The ``limit`` best visible, admitted records given every row's similarity,
        best first, ties by ``seq``. Every step touches at most about :data:`_CHUNK`
        rows (plus ``4 * limit``): no step grows with the index.

        Phase 1 keeps the ``max(4 * limit, 64)`` most similar rows, chunk by chunk, and
        the largest similarity it left out (``bound``), then visits the kept rows best
        first until one falls below the heap's worst. If that worst is above ``bound``
        the heap is exact (nothing left out can enter). Otherwise (filters rejected
        most rows) phase 2 visits, chunk by chunk, every other row that can still enter.
        """
        sims, recs = scored
        n = len(sims)
        take = min(n, max(4 * limit, 64))
        kept = np.empty(0, np.int64)
        bound = -math.inf
        for start in range(0, n, _CHUNK):
            cand = np.concatenate((kept, np.arange(start, min(n, start + _CHUNK))))
            if len(cand) > take:
                part = np.argpartition(-sims[cand], take - 1)
                bound = max(bound, float(sims[cand[part[take:]]].max()))
                cand = cand[part[:take]]
            kept = cand
            yield
        order = kept[np.argsort(-sims[kept], kind="stable")]
        heap: list[tuple[float, int, Record]] = []  # worst on top: (score, -seq, rec)
        version = view.version

        def visit(r: int) -> None:
            group = recs[r]
            if group is None:
                return
            sim = float(sims[r])
            for rec in list(group):
                if rec.born <= version < rec.died and (accept is None or accept(rec)):
                    item = (sim, -rec.seq, rec)
                    if len(heap) < limit:
                        heapq.heappush(heap, item)
                    elif item[:2] > heap[0][:2]:
                        heapq.heapreplace(heap, item)

        for done, r in enumerate(order.tolist(), 1):
            if len(heap) == limit and float(sims[r]) < heap[0][0]:
                break
            visit(r)
            if not done % _STEP:
                yield
        if bound == -math.inf or (len(heap) == limit and bound < heap[0][0]):
            return _ranked(heap)
        # Phase 2: every row not kept whose similarity can still enter.
        seen = np.zeros(n, np.bool_)
        seen[kept] = True
        for start in range(0, n, _CHUNK):
            end = min(n, start + _CHUNK)
            part_sims = sims[start:end]
            ok = ~seen[start:end]
            if len(heap) == limit:
                ok &= part_sims >= heap[0][0]
            for done, r in enumerate((np.flatnonzero(ok) + start).tolist(), 1):
                if len(heap) == limit and float(sims[r]) < heap[0][0]:
                    continue
                visit(r)
                if not done % _STEP:
                    yield
            yield
        return _ranked(heap)

    def statistics(self) -> dict[str, int]:
        """Rows, dead rows, indexed records, offered vectors, inline embeddings. O(1)."""
        return {
            "rows": self._n,
            "dead_rows": self._dead,
            "records": len(self._row_of),
            "offered": len(self._offered),
            "inline": self.inline,
        }

    @property
    def nbytes(self) -> int:
        """Bytes of the vector matrix (capacity, not only the rows in use). O(1)."""
        return int(self._matrix.nbytes)

    def _check(self, live: Iterable[Record]) -> None:
        """Assert every invariant; ``live`` is every unpurged record. O(n * dim)."""
        live_set = set(live)
        assert set(self._row_of) == live_set
        assert len(self._recs) == self._n <= len(self._matrix)
        dead = 0
        for r, group in enumerate(self._recs):
            if group is None:
                dead += 1
                continue
            assert group, "an empty row must be dead"
            text = document_text(group[0])
            assert self._row_of_text[text] == r
            for rec in group:
                assert self._row_of[rec] == r
                assert document_text(rec) == text
            norm = float(np.linalg.norm(self._matrix[r]))
            assert norm == 0.0 or abs(norm - 1.0) < 1e-4
        assert dead == self._dead
        assert len(self._row_of_text) == self._n - dead
        assert not self._matrix[self._n :].any()
