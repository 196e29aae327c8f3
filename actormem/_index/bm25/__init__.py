"""Okapi BM25 as an owner-maintained, snapshot-read scoring index.

Theory of operation
-------------------
:class:`BM25Scorer` is a frozen configuration; :meth:`BM25Scorer.make_index` gives a
:class:`BM25Index` that only the owner task writes (``add``/``retire``/``purge``/``vacuum``)
and that readers query through a snapshot: ``top_k`` at once, or ``top_k_steps``, a
generator that yields after every bounded slice of work so that the owner may write in
between (the slicing protocol; ``top_k`` drains it).

Texts, not records. A record's BM25 score before its recency and prior weights depends
only on its document (its ``memory`` text and tags): the term frequencies, the length,
and corpus statistics shared by all. Agent memories repeat texts (the same tool call, the
same fact), so the index keeps one ``_Group`` per distinct document: its number, the
numbers of its distinct terms and its records (sorted by ``seq``). The term numbers live
in the index's *term pool* (``postings._TermPool``, ``knobs._TERM_POOL``): one
append-only array of every group's term numbers (uint16 while at most 65,536 term
numbers were given: a deleted term's number is not reused, so it never narrows; a
restore from the image numbers the live terms alone), group ``num``'s at
``data[starts[num]:starts[num + 1]]``, compacted once a quarter of it is purged groups';
a term's frequency in a group is its posting list's. (With the knob off, each group
keeps its own exactly sized ``array('i')`` of its term numbers packed with their
frequencies capped at 255, ``'q'`` once the vocabulary passes 2**23 terms: the layout
before.) A text is tokenized once; storing it again only appends the record to its
group. The index holds

* one group per document that has an un-purged record, numbered in creation order
  (numbers are never reused); a table of groups by number (None once purged), an
  int32 numpy array of document lengths by number and a uint8 one of alive marks (0
  once purged; compaction reads it). With ``knobs._GROUP_COLUMNS`` (the default, with
  the term pool) a group is no object but its number: its slot in the table holds its
  records themselves (its one record, or a ``postings._Recs`` list by seq that also
  carries the text), the purged records still in a list are counted in a dict of the
  groups that have any, and the document -> number map is the word-overlap core's
  ``GroupTable`` (``knobs._GROUP_TABLE``: a tag and the number a text, the text read
  back from the group's slot; tagged documents, and every document without the core,
  in a dict). With the knob off, a ``_Group`` object per document holds its number and
  records (the layout before);
* one ``_Term`` per term, numbered likewise (a term table maps numbers back): its
  posting list as two ``array``: the group numbers (ascending, since groups are numbered
  in creation order and appended when made) and the term frequencies (bytes until one
  exceeds 255, then int32); the number of groups in it whose records are all purged;
  ``df`` at the newest version (the records not retired whose document has the term);
  a reader-side cache of the largest saturation in the list; and, for the longest
  lists (``knobs._DENSE_TFS``: at least one group in 8), their frequencies by group
  number in two bits (``_Term.dense``: 0 absent, 1 or 2, 3 for three or more), which
  the owner brings up to date every few thousand new groups, writing only at groups
  no published array covers (a reader takes the array with its lists and reads the
  groups below its ``upto``; newer ones are sought in the list's tail), so that the
  compiled core looks a group up in one byte instead of searching the list;
* N and the total length at the newest version, and a *change log*: one
  ``(version, group, +1 or -1)`` entry per ``add`` (at ``rec.born``) and ``retire`` (at
  ``rec.died``), sorted by version.

A reader at version ``v`` gets the statistics of its own snapshot by undoing the log
entries newer than ``v`` (none, for the newest snapshot): this is the copy-on-write read
the engine's contract asks for. ``vacuum(oldest)`` (and ``purge``) drop the entries no
live snapshot needs; a reader older than the log counts the visible postings instead
(slower, still exact). Records not visible in a snapshot stay in the groups and are
skipped by their versions (``born <= v < died``, the contract of ``ReadView``).

Posting lists only grow at the end and lose dead groups by compaction once half of a
list is dead; a group's record list is compacted the same way, so ``purge`` is amortized
O(1) per posting. Compaction, growth of the length array and the switch of a list's
frequencies to int32 *replace* the array objects, never resize them in place: a sliced
reader takes each array and its length once, at its start, and reads only that prefix
(numpy views of it are dropped before every yield, so the owner's appends never meet a
buffer export).

Top-k is MaxScore (Turtle & Flood, "Query evaluation: strategies and optimizations",
IP&M 31(6), 1995) term at a time over groups, vectorised with numpy. Each term has an
upper bound on its contribution (its weight and IDF times the largest saturation in its
list). The terms with the highest bounds (the rarest) are *essential*: their lists are
accumulated into a dense array of partial scores by group number, until the bounds of
the terms left sum below ``theta``, a lower bound on the k-th best score: the k-th best
*exact* score of the records of the groups with the highest partial scores. No group
outside the accumulator can then reach the top k. The candidates (partial score plus
the bounds left reaching ``theta``) take the next lists whole while they outnumber
those lists' postings a quarter, then are refined term by term, best bound first, by
binary search in each sorted list; those left are scored exactly, in the query's term
order and with the brute force's floating-point operations (one by one in Python, or
elementwise in numpy: the same IEEE operations), so scores equal a brute force's bit for
bit; ties break by ``seq``. The largest saturation of a list is cached by readers at a
reference average length and used, stretched by the drift of the average length since,
only as a bound (``postings._Term.bound_steps``); all bounds carry a relative slack of 1e-9 so that
summation order can never drop a true result.

With the compiled core (``_cbm25.c``, :func:`~actormem._index.kernels.bm25_core_active`;
``ACTORMEM_BM25_CORE=0`` switches it off) the same top-k comes from a different driver in
C: MaxScore whose non-essential terms (only looked up for candidates of the others; their
bounds sum below ``theta``) are chosen cost-aware, greedily by bound per posting left
while the sum stays below ``knobs._SPLIT_ROOM`` (0.8) times ``theta``, so
that long lists of common terms are looked up and short ones walked; a term once
non-essential stays so. The essential lists are walked term at a time over windows of
up to 4,096 groups (no wider than a step's output, 1,024) into a score array; a group
whose partial score plus the non-essential bounds can reach ``theta`` gets the lookups,
largest bound first, while it still can.
``theta`` starts as the k-th best record score among the first groups (128) of the
rarest term's list and rises, in Python, from the exact record scores of what the C code
returns; each call is one bounded step (the slicing protocol) that re-takes the buffers
and keeps only positions and the non-essential flags. ``knobs._COST_SPLIT = False`` keeps
the driver before it (document at a time, MaxScore's split by bound, block-max windows
after Ding & Suel, SIGIR 2011: a reader-side cache per list holds, for each complete
block of 64 postings, its largest frequency and smallest document length, whose
saturation bounds the whole block at any average length). Exact
scores are computed as above, so both drivers give the same results bit for bit
(``tests/test_bm25_core.py``); the core also runs ``add``'s term loop.

Invariants (checked by ``BM25Index._check``): every un-purged record is in exactly
the group of its document, which is listed, with its term frequency, in the posting list
of each of its terms, in ascending group order; the tables map numbers to the live
groups and terms; the dead-entry counters count dead entries and stay at most half of
their list; ``df``, N and the total length equal the counts over the records not
retired; the log is sorted by version; the cached largest saturations match their
reference.

Scoring follows Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond" (FnTIR 3(4), 2009) with Lucene's IDF and Lucene's term-frequency saturation
without the constant ``(k1 + 1)`` numerator (``BM25Similarity`` since Lucene 8); these are
exactly ``bm25s``' ``method="lucene"`` scores.

Modules
-------
``scorer``     :class:`BM25Scorer`, the frozen configuration and its validation;
``index``      :class:`BM25Index`: the owner's writes (add, retire, purge, vacuum), the
               statistics of a snapshot and the invariant check;
``postings``   a text's group and a term's posting list (bounds, compaction);
``changelog``  the change log that gives an older snapshot its N, total length and df;
``search``     the reader's MaxScore top-k, in bounded steps, and the exact scores (and
               the driver of the compiled core);
``knobs``      tuning constants (speed and memory only, never results).
"""

from __future__ import annotations

from .index import BM25Index
from .scorer import BM25Scorer

__all__ = ["BM25Index", "BM25Scorer"]
