"""The default scorer: loopctl's word-overlap score, exact, from an index.

Score (loopctl ``InMemoryStore::retrieve``, ``src/memory/builtin.rs``)::

    score = 0.5 * relevance
          + 0.4 * matched / max(number of query words, 1)
          + 0.3 * (1 if any tag, lower-cased, contains the whole trimmed, lower-cased query)
          + 0.1

Query words are ``query.lower().split()``: punctuation kept, a repeated word counted each
time. A word matches when it is a substring of ``memory.lower()`` ("deploy" matches
"deploys"). From loopctl's later line: the query is trimmed before the tag test, and a
blank query gives no tag bonus (the original gave every tagged entry the bonus, since the
empty string is in every tag). Ties keep insertion order.

Theory of operation
-------------------
Matching depends only on the text, so the index numbers each distinct lower-cased text
(a *group* of the record versions that carry it) with a group number, never reused, and
keeps per group number the largest relevance and the smallest ``seq`` of its records
(numpy arrays: upper and lower bounds, never lowered by a purge). Per whitespace token of
the lower-cased texts it keeps a *posting list* (``array('i')`` of group numbers), and a
:class:`~actormem._index.substring.SubstringVocab` maps a query word to the tokens that contain
it; tags get a vocabulary and posting lists of records.

A retrieve counts, for every group number at once, how many query words its text
contains: per distinct word, the set of matching groups is the union of the posting
lists of the tokens that contain the word (joined in C, as one numpy array), added to a
numpy count array. The sets of words with long postings (the common words of questions:
*what*, *the*, *do*, names) are cached, as a byte per group or as sorted group numbers,
and extended for groups added since by testing ``word in text``; so a repeated common
word costs one vectorised add. Then the groups are visited by matched count, highest
first: within one count the score's bound is a function of the group's largest
relevance, and the best ``limit`` groups by (bound, smallest seq) are picked with
``numpy.partition``, scored exactly record by record into a heap, and the next batch
taken only while its bound can still enter the top ``limit``. Entries that match no word
are visited in descending relevance through the view, as long as their bound can still
enter. Bounds are computed with the score's own float operations in its own order, so
the stop tests are exact, ties included.

Readers take the group count and the arrays once, at the start, and only read group
numbers below that count; posting lists and group record lists are append-only for
readers and are compacted by replacing them (a posting list when half of its group
numbers are purged). ``_WordOverlapIndex.top_k_steps`` yields between bounded chunks
of work (see ``notes/slicing_protocol.md``); writes between the yields are invisible to it.

Modules
-------
``formula``    the score from its parts and the from-scratch reference;
``scorer``     :class:`WordOverlapScorer`, the frozen configuration;
``index``      ``_WordOverlapIndex``: the owner's writes (add, purge, renumber) and
               the invariant check; ``top_k`` hands over to ``search``;
``numbering``  the per-numbering storage: group records, bounds, posting lists, masks,
               the tag postings;
``masks``      the short words answered from a 128-bit mask per text;
``matchsets``  a query word's set of matching groups: from the postings or the masks,
               and the cache of them across retrieves;
``search``     the reader's top-k over the counts (bounded steps);
``knobs``      tuning constants (speed and memory only, never results);
``ccore``      the checked wrappers of the compiled core (``_cwordoverlap.c``): the
               owner's add of a new text, the short-word masks, and the reader's word
               loop for words with small match sets; the Python code is the reference.
"""

from __future__ import annotations

from .formula import combine_word_overlap, word_overlap_score
from .scorer import WordOverlapScorer

__all__ = ["WordOverlapScorer", "combine_word_overlap", "word_overlap_score"]
