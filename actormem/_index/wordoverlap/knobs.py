"""Tuning constants of the word-overlap index: speed and memory only, never results.

Tests lower them (``monkeypatch.setattr(knobs, "_STEP", 1)``) to make every slicing and
compaction path run on small inputs; the modules read them as ``knobs._NAME`` at call
time so that such a patch reaches every user.
"""

from __future__ import annotations

from .. import kernels as _kernels

#: Bytes of cached word match sets kept across retrieves (least recently used dropped).
_CACHE_BYTES = 64 << 20
#: Words per generation of a numbering's word memo (``ccore.count_words``): the young
#: generation becomes the old one (the old dropped) once it holds this many, so up to
#: twice as many small match sets are kept.
_MEMO_WORDS = 8192
#: A query word that no token contains (a number, an id, a typo: the main job's JSON
#: tool results as queries bring a few per retrieve) is kept in the word memo as the
#: 3-gram of it found missing, and answered by one probe of that gram while it stays
#: missing; before, every retrieve probed up to eight of its grams again (each a new
#: substring, hashed). False: absent words are not remembered (the path before it;
#: the same counts).
_MEMO_ABSENT = True
#: With the word memo, ``count_words`` neither reads nor writes the vocabulary's
#: long-word cache (``SubstringVocab._cache``) for the words it looks up: the memo
#: keeps their answers, and the cache's FIFO (a tuple, a dict insert and an eviction
#: that scans the dict's deleted slots from the front) cost ~1 us per new query word,
#: ~8 per main-job retrieve. A word the memo drops (its generation turned old) has
#: every candidate verified again. False: read and kept as before (the same counts).
_MEMO_OWN_CACHE = True
#: ``ccore.count_words`` leaves the per-word type tests (every word a ``str``, every
#: multiplicity an ``int``) to its C loop, which makes the same tests with the same
#: ``TypeError`` before it reads a word; the Python wrapper's two ``all()`` generator
#: scans cost ~1.5% of the main job's instructions. The range of the multiplicities is
#: still checked in Python. False: the wrapper tests every word too (the path before).
_LEAN_WORD_CHECKS = True
#: ``top_k_steps`` lowers a query once (its words and its tag match from the same
#: lowered text: stripping commutes with lowering) and counts its words with
#: ``collections``' C counter; before, a main-job query (a tool result, up to 24,000
#: characters) was lowered twice and counted by a Python loop. False: the path before
#: it (the same words, counts and order).
_QUERY_ONCE = True
#: With ``_QUERY_ONCE`` and the core, an ASCII query is lowered, split and counted by one
#: C call (``ccore.query_words``: one pass over its bytes, a str per distinct word
#: only); ~4.5% of the in-memory main job's instructions went to ``lower``, ``split``
#: and the counter. False: the three calls (the same text, words, counts and order).
_QUERY_WORDS_C = True
#: With ``_QUERY_WORDS_C``, a query word of at most 24 characters is taken from the
#: core's process-wide table of 8,192 strs (by the word's hash: the str an earlier
#: query's same word got) instead of a new str: no allocation, no free, its hash
#: computed once, and the dicts keyed by query words (the query's counts, the word
#: memo of ``ccore.count_words``) find it by identity instead of comparing bytes.
#: False: a new str per distinct word and query (the same values).
_QUERY_INTERN = True
#: ``ccore.count_words`` does not look a word of 3 or more characters up in
#: ``masks._SHORT_BIT`` (its words have 1-2 characters, asserted in ``masks``): one
#: dict lookup less per query word counted in C (~120 instructions). Any other
#: ``short`` dict is read as before. False: the lookup (the same answers).
_SHORT_UNREAD = True
#: With ``_MEMO_OWN_CACHE``, a word of 4 or more characters that ``count_words`` looks up
#: and then leaves to Python for its postings (more than its limit: a common word's
#: first use) has the token ids it verified kept in the vocabulary's long-word cache,
#: where ``MatchFinder.match_steps``' lookup reads them: before, that lookup verified
#: every candidate token again (``play`` at 1M: 1,113 tokens, ~270-770 us). False: not
#: kept, the path before it (the same sets).
_MEMO_KEEP_LEFT = True
#: A retrieve over a small numbering with a short query (at most ``_ONE_STEP_GROUPS``
#: groups and ``_ONE_STEP_CHARS`` characters: the main job's memories of a few thousand
#: entries and ~98% of its tool-result queries) runs its steps in one task step
#: (``_WordOverlapIndex.one_step_ok``, read by ``snapshot._retrieve_sliced``): no clock
#: read and no slice boundary between them, one schedule point at its end. Its whole
#: work is then a few tenths of a ms (the steps' bounds still hold: at most
#: ``_CHUNK`` elements per operation, so at most this many groups, times the words).
#: 0 groups: every retrieve in slices (the path before it; the same results).
_ONE_STEP_GROUPS = 8192
_ONE_STEP_CHARS = 2048
#: ... and at most this many entries in the retrieve's view: the steps' work is bounded
#: by the groups only while each group holds a few records; many entries of a few texts
#: (one group) with a filter that rejects them run every record's test, which must stay
#: sliced (review21a: 100,000 entries of one text, ~0.5 s in one task step).
_ONE_STEP_ENTRIES = 8192
#: A cached match set is extended by testing the texts of up to this many new groups;
#: beyond that it is rebuilt from the posting lists.
_SCAN_NEW = 4096
#: Extending a cached match set tests the new groups' texts with ``kernels.wo_scan``'s
#: ``rare`` search: a text and word of one byte per character searched by the word's
#: least common byte (``memchr``, vectorised) and a compare where it falls, instead of
#: ``PyUnicode_Find`` (~2,300 instructions a text in the main job, ~100k texts). Other
#: texts take ``PyUnicode_Find``. The same groups. False: ``PyUnicode_Find`` for every
#: text, the path before it.
_SCAN_RARE = True
#: A match set is kept as one byte per group when it holds at least 1/_DENSE of them.
_DENSE = 16
#: The same for the bit-sliced counts (``ccore.BitPlanes``): a bitset of ``n / 8`` bytes
#: is smaller than the group numbers (4 bytes each) from ``n / 32`` of them.
_DENSE_BITS = 32
#: Groups one call over the bit-sliced counts (``ccore.BitPlanes``: the largest count
#: of a chunk, or its groups of one count) covers between two yields: a 64-bit word
#: holds 64 groups, so this many cost about what ``_CHUNK`` byte counts do.
_BITS_CHUNK = 1 << 18
#: Python-level work items (groups, records, lists) between two yields of ``top_k_steps``.
_STEP = 128
#: Array elements one vectorised operation of ``top_k_steps`` touches between two yields.
_CHUNK = 1 << 15
#: Groups of one count whose bounds are sorted out between two yields.
_VISIT = 1 << 13
#: Postings joined and scattered into a match set between two yields (random writes).
_JOIN = 1 << 13
#: The owner renumbers the groups once this many numbers, and over half, are purged.
_RENUMBER_MIN = 4096
#: Records of the relevance walk between two yields.
_WALK_STEP = 128
#: Scratch count arrays kept per dtype for later retrieves (avoids page faults).
_POOL = 64
#: Groups whose masks the owner computes at once (``_Numbering.fill_masks``); fewer
#: are pending at any time. A retrieve that reads the masks first computes the pending
#: ones, ``_MASK_STEP`` between two yields (about 3 us each).
_MASK_BATCH = 128
_MASK_STEP = 32
#: The compiled ``add`` is ``ccore.add_text_known`` (no token set when every token has
#: a posting list). False: ``ccore.add_text`` for every text, the path before it
#: (``stress/bench_store64.py --state`` compares both; the same structures).
_ADD_KNOWN = True
#: The compiled ``add`` is ``ccore.add_text_cached``: an ASCII text's tokens read from
#: its bytes and looked up in the numbering's token cache, posting appends written in
#: place. False: the path before it (``_ADD_KNOWN``'s choice); the same structures
#: (``stress/bench_store64.py --state`` compares both).
_ADD_CACHED = True
#: A batch of records (``MemoryState.store_many``'s inserts) is indexed by
#: ``_WordOverlapIndex.add_many``: one Python loop for the groups' bookkeeping and one
#: ``ccore.add_texts_cached`` call for the batch's new texts (with ``_ADD_CACHED``).
#: False: ``add`` per record, the path before it; the same structures
#: (``stress/bench_store64.py --old-knobs`` compares both through the engine).
_ADD_MANY = True
#: The compiled adds (``ccore.add_text_cached``, ``ccore.add_texts_cached``) acquire a
#: new token's grams without building its key set (``vocab_acquire_fast`` in
#: ``_cwordoverlap.c``): existing gram lists appended to in the token's order, the set
#: built only when two or more of its grams are new (their order decides ``_grams``'
#: and the ``_sub`` sets' insertion order); a new token's posting list made without
#: argument tuples. False: the path before it; the same structures
#: (``stress/bench_store64.py --old-knobs`` compares both).
_ACQUIRE_FAST = True
#: The same compiled adds leave the posting lists, gram lists and ``_sub`` sets they
#: make untracked by the cyclic collector (``gc``): they hold only ints and strs, so no
#: reference cycle can pass through them, and they were two thirds of the tracked
#: objects a store leaves (0.93 arrays, 0.72 lists and 0.12 sets an entry, beside its
#: ``Record``), each traversed again by every full collection. False: tracked, the
#: path before it (the same structures; ``stress/bench_store64.py --old-knobs``).
_UNTRACK = True
#: The dense sets of a retrieve's bit-sliced counts are added seven at a time through
#: carry-save adders (``ccore.DenseBits``, about a third of the word operations at six
#: planes). False: one set at a time through every plane, the path before it (the same
#: counts; ``stress/bench_wocore.py --dense`` compares both).
_DENSE_CSA = True
#: A sparse match set of at least ``n / _SPARSE_AS_DENSE`` group numbers (``n`` the
#: retrieve's groups) is turned into a bitset and added with the dense sets (a set bit
#: per group, then ``n / 64`` word operations shared with the other sets) instead of
#: group by group into the planes (a mark, a carry through the planes and an unmark per
#: number, random accesses). 0: never, the path before it (the same counts). Pays with
#: ``_DENSE_CSA`` only: one set at a time through every plane, the bitsets cost more
#: than the group-by-group adds they replace.
_SPARSE_AS_DENSE = 128
#: A retrieve's bit-sliced counts keep the largest count of each 64-group word (written
#: by the last pass over the planes, ``ccore.BitPlanes.set_word_maxima``): a chunk's
#: largest count is read from them, and the groups of a count are selected only in the
#: words that can hold it. False: both read every plane of every word, the path before
#: it (the same groups).
_WORD_MAXIMA = True
#: A new match set is joined from its posting lists in C a batch of whole lists at a
#: time (up to ``_JOIN`` postings and this many lists between two yields). 0: in
#: slices of at most ``_STEP // 2`` lists joined in Python, the path before it (the
#: same sets).
_JOIN_LISTS = 1024
#: The owner keeps each short word's match set (:data:`~.masks._SHORT`) as a row of
#: bits over the group numbers, written from the masks as they are computed
#: (``_Numbering.rows``, 16 bytes per group of capacity, ``ccore.bits_rows_from_masks``),
#: so a retrieve's dense short-word set is that row, never built by a reader (a pass
#: over every mask at its first use, ~0.6 ms at 1M). Read at a numbering's creation
#: for the owner's side (no rows kept when False) and at each retrieve. False: the
#: path before it (the same sets).
_SHORT_ROWS = True
#: A posting list longer than ``_JOIN`` joined into a new dense match set (with
#: ``_JOIN_LISTS``) is read in place by C a ``_CHUNK`` slice at a time
#: (``ccore.bits_join_slice``). False: each slice copied, filtered below ``n`` in numpy
#: and set (``ccore.bits_set``), the path before it (the same sets). A common word's
#: first retrieve at 1M joins 10^5-10^6 postings, most of them from a few long lists.
_JOIN_IN_PLACE = True
#: The carry-save dense pass (``_DENSE_CSA``) keeps a word's planes in registers: the
#: sets of a multiplicity above 8 are added to a copy, so the compiler never indexes
#: the planes by a variable and does not keep them on the stack (where the copy back
#: stalled on store forwarding, ~40% of the pass). False: the loop before it (the same
#: sums).
_CSA_REGS = True
#: With the bit-sliced counts a match set of at least ``n / _BITSET_FROM`` groups (when
#: that is below ``n / _DENSE_BITS``) is built, cached and read as a bitset too, and a
#: short word's owner row is read from that size: a retrieve adds it with the dense
#: sets as it is, instead of writing it into a pooled bitset every time
#: (``_SPARSE_AS_DENSE``: a zeroed ``n / 8`` bytes and a bit set per group). Costs
#: cache room: ``n / 8`` bytes for a set of ``n / 128`` groups instead of ``n / 32``.
#: 0: ``_DENSE_BITS`` alone, the path before it (the same counts).
_BITSET_FROM = 128
#: A ranking's set of groups (``WordOverlapSearch._visit``) is ordered by bound and seq
#: in C (``ccore.visit_heap``: the bounds computed and filtered by the heap's worst and
#: a binary heap built in one call; ``ccore.visit_pop``: the next batch in order as
#: tuples) instead of a dozen numpy calls per set and batch (bounds, filter, min/max,
#: partition, lexsort: ~4 us each on the ~100 groups of a question's count); with the
#: word maxima the chunks' largest counts are read in one call
#: (``BitPlanes.maxima_of_chunks``) and a count's groups selected from as many chunks
#: as the room holds in one call (``BitPlanes.select_chunks``), not a call per chunk.
#: False: the path before it (the same groups visited in the same order of bound and
#: seq).
_VISIT_C = True
#: With ``_VISIT_C``, a set's first batch of groups is picked from the set left in no
#: order (``ccore.visit_heap(..., order=False)`` then ``ccore.visit_select``: one pass
#: keeping the best ``batch`` seen, worst at the root) instead of a heap of the whole
#: set built first (``visit_heap``'s heapify: a sift per two groups, for a set of which
#: a main-job retrieve reads ~27 groups of ~1,400); the rest is made a heap only when a
#: second batch is read (``visit_order``). False: the heap of the whole set, the path
#: before it (the same groups in the same order of bound and seq).
_VISIT_SELECT = True
#: The first batch of a visit's groups read in order: ``max(limit, _VISIT_BATCH)``,
#: four times more each batch after (tests make it small, to read many batches).
_VISIT_BATCH = 32

#: The owner keeps a bitset over the group numbers (``words_of(capacity)`` uint64) beside
#: each posting list of at least ``n / _TOKEN_BITS`` group numbers (``_Numbering.tbits``,
#: chosen every ``n / 8`` new groups and brought up to date every ``_TOKEN_BITS_STEP``,
#: ``_Numbering.token_bits``), and a new
#: dense match set ORs a long list's bitset into itself instead of setting a bit per
#: posting (a question's common word at 1M joined 10^5-10^6 postings, 1-3 ms, many of
#: them in the ~100 lists of over n / 32 numbers; ORing one is n / 64 words, ~10 us). A
#: bitset is about as large as the list it shadows (capacity / 8 bytes, up to twice a
#: list of n / 32 numbers just after a growth, against 4 bytes a posting);
#: at 1M, 111 lists, 14 MB. 0: no bitsets kept or read, the path before it (the same
#: sets).
_TOKEN_BITS = 32
#: Group numbers handed out before the owner keeps any list's bitset (``_TOKEN_BITS``).
_TOKEN_BITS_FROM = 1 << 16
#: Between two upkeeps of every list (``n / 8`` groups apart), the owner sets the
#: postings added to the lists it keeps bitsets of every this many groups (O(those lists)
#: a time), so that a reader finds at most this many groups' postings missing (before,
#: up to ``n / 8`` groups' postings, ~100,000 at 1M: the first reader of a list paid
#: them, ~1-5 ms).
_TOKEN_BITS_STEP = 1024

#: The owner keeps each token's posting list by its vocabulary id as well
#: (``_Numbering.byid``: a list indexed by id, extended every mask batch, its slots
#: updated where the purge replaces or deletes a list), and a new match set's lists are
#: read through it in C (``ccore.lists_of_ids``: a list slot and the array's size per
#: token, the two dict lookups only for ids not in it yet); lists too short for a kept
#: bitset (``_TOKEN_BITS``) skip the search for one. Before, every token of a word was
#: an ``items`` and a ``post`` lookup in Python (``play`` at 1M: 1,113 tokens, ~1 ms of
#: dict and object misses). 8 bytes per token. False: not kept and not read, the path
#: before it (the same lists in the same order).
_LISTS_BY_ID = True
#: ``ccore.lists_of_ids`` (``_LISTS_BY_ID``) prefetches the ids, slots and lists this
#: many tokens ahead, and ``ccore.bits_join`` holds the buffers of this many next
#: lists (at most 16) and prefetches their first lines: a common word's first set
#: reads hundreds of short lists, each a few misses in a row otherwise (cold, ``play``'s
#: lists read 581 -> ~220 us). 0: no prefetching, the path before it (the same sets).
_PREFETCH = 8

#: Retrieves of ``_BITS_MIN_WORDS`` query words or more over fewer groups than
#: ``_BITS_MIN`` count with bytes (the path without ``ccore.BitPlanes``): a long query
#: (a tool result as the query, ~95 words) over a few thousand groups has mostly small
#: match sets that ``count_words`` adds number by number, a byte add each against a
#: carry through every plane (7 for 95 words), and few dense sets for the planes to
#: gain on. Short queries keep the planes at every size: at 5,000 and 20,000 groups
#: LoCoMo questions took 1.75x and 2.8x the CPU with bytes, tool results 0.77x and 0.92x
#: (``stress/bench_wocore.py --bits``; even at 60,000). 0: the bit-sliced counts at
#: every size, the path before it (the same counts).
_BITS_MIN = 1 << 15
#: See ``_BITS_MIN`` (between ~15 and ~95 words not measured).
_BITS_MIN_WORDS = 32
#: The byte path's ranking over at most this many groups visits the groups of its
#: highest counts at once by bound (``WordOverlapSearch._rank_flat``: a few array
#: operations), down to the count that brings ``_RANK_FLAT_GROUPS`` groups (0: every
#: matched group), then count by count as before (several array operations and a yield
#: per count). 0: count by count from the top at every size, the path before it (the
#: same top-k, scores and ties). In the main job (swarm, in-process, alternating, load
#: 4-5) every matched group at once took 4.51 s of CPU, 64 groups 4.68, count by count
#: 5.04; on repeated retrieves of one memory (warm, no swarm) 64 groups and count by
#: count took ~146 us, every group at once ~190.
_RANK_FLAT = 1 << 15
_RANK_FLAT_GROUPS = 0
#: The byte path's flat ranking (``_RANK_FLAT``, every matched group at once) picks its
#: batches straight from the counts in C (``ccore.flat_first``: one pass over the
#: counts computing each matched group's part and bound and keeping the best batch,
#: a second pass after the last group read only when a batch was not enough) instead
#: of an index array, a parts array (five numpy calls), ``visit_heap`` writing every
#: matched group to a buffer and ``visit_select`` reading it again: a main-job
#: retrieve matched ~2,000 groups and read ~27 of them. Over at most ``_CHUNK``
#: groups (one call reads every count; ``_RANK_FLAT`` is ``_CHUNK``). Its chunks'
#: largest counts (only the count-by-count loop below the flat visit reads them, and
#: with ``_RANK_FLAT_GROUPS`` 0 that loop is empty) are not computed. False: the path
#: before it (the same top-k, scores and ties: the visit's result does not depend on
#: the order it reads the groups in).
_FLAT_FIRST = True

#: ``ccore.flat_first``'s scan, once its best ``k`` are kept (and neither ``kth`` nor
#: ``after`` is given), passes over a group whose count's best bound (with the largest
#: ``maxrel``) is below the worst kept by its count alone, sixteen byte counts at a time
#: (SSE2), instead of computing its bound (the main job: relevances all 1.0, ~2,000
#: matched groups a retrieve, ~32 kept). False: every matched group's bound computed,
#: the path before it (the same groups kept and counted).
_FLAT_CUT = True

#: The flat visit's first batch (``ccore.flat_first``'s ``k``) is ``max(limit,
#: _FLAT_BATCH)`` when this is below ``_VISIT_BATCH`` (0: ``_VISIT_BATCH``, the path
#: before it). The main job (limit 3) reads ~8 groups and records a retrieve and never
#: needed a second batch with 8 (counted over its 4,824 flat visits); a smaller best-k
#: heap is filled and replaced less, its worst rises sooner (``_FLAT_CUT``), and fewer
#: tuples are made. A visit that reads the whole batch asks for four times as many
#: after it, so any batch gives the same groups in the same order.
_FLAT_BATCH = 8

#: A retrieve takes its view's top relevance (the bound of the entries that match no
#: word) from ``view.first_by_relevance()`` when the view has it (the engine's: the
#: sorted list's first record, when visible), instead of a ``by_relevance()`` generator
#: and its first chunk of 16 (a ``sortedcontainers`` seek, ~10 us a retrieve). False:
#: ``next(view.by_relevance(), None)``, the path before it (the same record).
_FIRST_PEEK = True

#: A retrieve whose stripped query has 3 or more characters skips the tag match when
#: the tag vocabulary has no 3-gram at all (``_TagPostings.none_match``: no tag was ever
#: added, the main job's case), whose answer is then ``[]`` with no yield and nothing
#: changed. False: the match run (``lookup_steps`` probing a 3-gram of the whole
#: query, ~3 us a retrieve), the path before it.
_TAGS_NONE = True

#: A query word of one or two characters outside the masks' table (``masks._SHORT``:
#: ``0,``, ``"4``, the JSON of tool results) has its match set cached however small
#: (then extended from the recent texts like any cached set): ``count_words`` leaves
#: such words to Python, which otherwise looked them up and joined their posting lists
#: again at every retrieve (the main job: ~0.85 joins per retrieve, mostly ``0,``).
#: False: cached only from the index's ``cache_min`` postings, the path before it (the
#: same sets).
_CACHE_SHORT_WORDS = True

#: The retrieve path's knobs above, in order: what ``stress/bench_wocore.py --counts``
#: turns off on its old side, and what the old-against-new tests switch together.
_QUERY_KNOBS = (
    "_DENSE_CSA",
    "_SPARSE_AS_DENSE",
    "_WORD_MAXIMA",
    "_JOIN_LISTS",
    "_SHORT_ROWS",
    "_JOIN_IN_PLACE",
    "_BITSET_FROM",
    "_CSA_REGS",
    "_VISIT_C",
    "_TOKEN_BITS",
    "_MEMO_KEEP_LEFT",
    "_LISTS_BY_ID",
    "_PREFETCH",
    "_ADD_UNROLLED",
    "_FIND_BYTES",
    "_PROBE_STRS",
    "_CAND_SIGS",
    "_MEMO_EPOCH_ONLY",
)

#: The compiled add (``add_text_cached``, ``add_texts_cached``) serves a text that is not
#: ASCII from the token cache too: its tokens are found by ``str.split``'s whitespace
#: (``Py_UNICODE_ISSPACE``) in place, an ASCII token (98% of them in these texts) looked
#: up in the cache by its bytes, any other made a str and looked up in the posting dict;
#: no split list. False: ``str.split`` and the dict for every token of such a text, the
#: path before it (the same structures).
_CACHE_UCS = True
#: The compiled adds (``add_text_cached``, ``add_texts_cached``) test a new ASCII token's
#: 1- and 2-character substrings against the vocabulary's active words (``_active``)
#: as bits built from that set (``active_bits_use`` in ``_cwordoverlap.c``) and kept in
#: the token cache until ``_active`` changes (it only grows: rebuilt per text, they cost
#: more than they save once it holds a few hundred words),
#: instead of making each substring and looking it up in the set: ~2 substrings and
#: set lookups per character of every new token, 2% of the main job's instructions.
#: A hit is made a str as before, so the same gram lists and ``_sub`` sets in the same
#: order. False: the path before it.
_ACTIVE_BITS = True
#: The compiled adds find an ASCII (or narrowed) text's tokens in one pass, each
#: token's cache hash computed as its bytes are read, whitespace by a 256-byte table;
#: before, a pass counted the tokens (two whitespace tests a byte), a second found them
#: and a third hashed each one. The same tokens, slots and structures. False: the path
#: before it.
_SCAN_ONE = True
#: ``ccore.add_texts_cached`` leaves the test that every text is an exact ``str`` to
#: its C function, which makes it (the same ``TypeError``, nothing added) on its copy
#: of the list before it adds any; the wrapper's ``all()`` over a generator cost ~0.9k
#: instructions a stored entry. False: the wrapper tests them too (the path before).
_LEAN_TEXT_CHECKS = True
#: ``ccore.text_masks`` (the pending texts' short-word masks) reads each text in a loop
#: per string kind, the last character's pair with the newline after it, instead of
#: ``PyUnicode_READ`` (a switch on the kind) and an end test per character. The same
#: masks. False: the path before it.
_MASKS_BY_KIND = True
#: ``add_many`` lowers each new text by the core's ``lower_text`` (``str.lower``'s value:
#: an ASCII text by ``str.lower``'s own C function, any other with its ASCII code points
#: by a table and the rest as ``str.lower`` maps them) instead of ``str.lower``, which
#: calls the Unicode database for every code point of a text that is not ASCII (13% of
#: the real texts, ~600 characters: ~5 -> ~2 us). False: ``str.lower``, the path before it.
_LOWER_C = True
#: ``add_many``'s loop makes each run of records with new texts and no tags (a group
#: number each, ``glist``, ``recent`` and the batch's lows, bounds and seqs) by the
#: core's ``add_groups_new`` in one call (``ccore.add_groups``); any other record by the
#: loop's Python body. False: the loop in Python, the path before it. The same
#: structures (``stress/bench_store64.py --old-knobs store10``).
_ADD_GROUPS_C = True
#: A numbering made while this is on (with the compiled core) keeps its text -> group
#: number map (``_Numbering.groups``) in the core's ``GroupTable`` (``_grouptable.h``):
#: a 32-bit tag of the text's hash and the number as an int32 per slot, the text read
#: back from ``glist`` when a tag matches, instead of a dict slot and an int object per
#: text (~55 B a distinct text at 1M). False, or without the core: the dict, the layout
#: before it (the same map; ``tests/test_entrybytes5.py`` drives both).
_GROUP_TABLE = True
#: The compiled adds (``add_text_cached``, ``add_texts_cached``) take a new ASCII token's
#: 3-grams, its active 2-character words and a new gram's 2-character parts from a table
#: of such strs kept in the token cache (``sub_str`` in ``_cwordoverlap.c``: 1 << 10 to
#: 1 << 16 slots, twice the gram dict's keys, a slot keyed by the characters), instead
#: of making each one a new str, hashing it for the gram dict and freeing it: ~430k
#: grams of ~28k new tokens in the main job, where the new str and its hash were half
#: of a gram's cost. Equal strs, so the same gram lists, ``_sub`` sets and orders.
#: False: a new str each time, the path before it.
_GRAM_STRS = True
#: The compiled adds grow a full posting list (an ``array('i')``) themselves, by
#: ``array_resize``'s formula and allocator (the same capacities), instead of calling
#: ``array.append``, which parses the int and then grows it: most lists are short, so
#: about one append in six of a batch of new texts finds its list full. False: the
#: append's call, the path before it (handed to the core by ``ccore._sync_grow``).
_GROW_DIRECT = True
#: ``ccore.count_words`` adds a word's match set into byte or word counts four numbers
#: a step (their indexes read before the four counts are written: ~2.75 instead of 5
#: instructions a number, the loop that is most of ``count_words``' own cost in the
#: main job). The same statements in the same order, so the same counts. False: one
#: number a step, the path before it.
_ADD_UNROLLED = True
#: ``ccore.count_words`` verifies a candidate token (``word in token``: a new word's
#: candidates, and a kept word's new ones) by comparing the bytes itself when both are
#: of one byte per character (ASCII or Latin-1), a first-character loop and the rest in
#: place, instead of ``PyUnicode_Find`` (~250 instructions a call, most of it set-up,
#: ~630k calls in the main job). Other strs take ``PyUnicode_Find``. The same answers.
#: False: ``PyUnicode_Find`` for every candidate, the path before it.
_FIND_BYTES = True
#: ``ccore.count_words`` takes a new ASCII query word's probe 3-grams (up to eight, to
#: find its shortest candidate list) and its memo's gram from the numbering's token
#: cache's table of gram strs (``knobs._GRAM_STRS``' table, made by the first count if
#: no add made it), instead of a new str each, hashed for the gram dict and freed: the
#: table's strs keep their hashes, and those the owner's adds entered are the dict's
#: own keys (~250k probes in the main job). The same lookups. False: a new str each
#: time, the path before it.
_PROBE_STRS = True
#: ``ccore.count_words`` tests a candidate token of a query word of 4 or more characters
#: (a new word's candidates, and a kept word's new ones) by the token's *signature*
#: first: one bit of 32 per distinct 3-character substring, kept per token id in the
#: numbering's token cache (taken when the token is first read as a candidate). A
#: word is in a token only if each of its 3-character substrings is, so a token
#: lacking one of the word's bits is skipped without its dict lookup and search (in
#: the main job ~86% of ~550k candidates, each a dict probe and a read of a token str
#: that the search then rejected). The same answers. False: every
#: candidate looked up and searched, the path before it.
_CAND_SIGS = True
#: ``ccore.count_words`` (flag 256) does not look a kept word's gram up again in the
#: vocabulary's gram dict to check that its memo still holds that gram's list, when the
#: memo's epoch is the numbering's and the numbering is the owner's current one
#: (``_Numbering.current``): only ``SubstringVocab.release`` replaces or deletes a
#: 3-gram's list, and the owner bumps the current numbering's epoch before every
#: release, so the memo's list is the dict's. A renumbered (retired) numbering's
#: readers keep the lookup. One gram-dict probe less per kept word (~210k in the main
#: job, 2% of its samples on the probe's line). The same counts. False: the lookup
#: for every kept word, the path before it.
_MEMO_EPOCH_ONLY = True
#: With ``_SCAN_RARE``, extending a cached match set also searches a word of one byte
#: per character in a text of two or four bytes per character in C (``kernels.wo_scan``'s
#: ``wide``: the code unit of the word's least common byte found eight at a time, SSE2,
#: and the word compared where it falls), instead of ``PyUnicode_Find``, which widens
#: the word into a new str first: three texts in four of the main job's scans hold a
#: character beyond Latin-1 (~78k finds of ~2,600 instructions each). The same groups.
#: False: ``PyUnicode_Find`` for those texts, the path before it.
_SCAN_WIDE = True
#: Extending a cached dense match set (a byte per group) that has room for the new
#: groups sets their bytes in C as the scan finds them (``kernels.wo_scan_mark``),
#: instead of a list of group numbers per step, joined and put in by numpy after the
#: scan. Only bytes of groups whose text contains the word are written, the same truth
#: any reader writes there (as the put in place did); the set, its cache entry and the
#: counts are the same. False: the list and the put, the path before it.
_SCAN_MARK = True
#: ``ccore.count_words`` leaves the range test of the multiplicities (each in
#: ``[0, 2**31)``) to its C function, which makes it for every int of the list, with the
#: same ``ValueError``, before it counts any word: the wrapper's builtin ``min`` and
#: ``max`` over a main-job query's ~48 distinct words cost ~6,000 instructions a call.
#: (A multiplicity that is not an int is refused by the C loop's type test, from
#: ``start`` on, as with ``_LEAN_WORD_CHECKS``.) False: ``min`` and ``max`` in Python,
#: the path before it.
_LEAN_MULT_CHECKS = True

#: The per-group columns (largest relevance, smallest seq, short-word masks and rows)
#: are 2 MiB aligned and asked of the kernel as transparent huge pages from 1 MiB
#: (``kernels.huge_zeros``), and the long posting lists (from 2 MiB) at each upkeep of
#: the lists' bitsets (``kernels.huge_advise``, again once a reallocation moved one):
#: a retrieve's reads of them are scattered, and at 1M groups 4 KiB pages missed the
#: TLB. On by default where the kernel's THP mode is ``madvise`` or ``always``; a
#: refused advice is ignored. The same results; False: the path before (``huge27``).
_HUGE_PAGES = _kernels.HUGE_PAGES_USEFUL
#: A query word ``ccore.count_words`` leaves to Python whose match set is cached dense,
#: up to date for this retrieve's groups and in the path's form (a byte per group, or
#: bits for the bit-sliced counts; with bits not a word of ``masks._SHORT_BIT``, whose
#: rows come first) is taken from the cache by ``WordOverlapSearch._core_words`` itself
#: (marked most recently used, its set put with the dense ones) instead of through the
#: ``add_word`` and ``MatchFinder.match_steps`` generators: ~7 such words a main-job
#: retrieve (its common words), each two generators, a yield through five levels and a
#: dozen calls. False: every left word through ``match_steps``, the path before it (the
#: same sets in the same order, the same cache order).
_LEFT_CACHED = True
#: A query word ``ccore.count_words`` leaves to Python whose match set is cached dense
#: as bytes with room for this retrieve's groups, covering all but at most ``_STEP`` of
#: them whose texts are still kept (``_SCAN_NEW``), and that is not a word of
#: ``masks._SHORT_BIT``, is extended by ``WordOverlapSearch._core_words`` itself: the
#: new groups' texts scanned in C setting their bytes (``kernels.wo_scan_mark``), the
#: entry moved last and marked as covering them, the set put with the dense ones: what
#: ``MatchFinder._extend`` does with ``_SCAN_MARK`` (one of its steps), without the
#: ``add_word``, ``match_steps`` and ``_extend`` generators. ~2 such words a main-job
#: retrieve (82% of the words reaching ``match_steps``, 11,672 of 14,187 a run). The
#: byte path only (needs ``_LEFT_CACHED``, ``_SCAN_MARK`` and the kernels). False:
#: those words through ``match_steps``, the path before it (the same sets in the same
#: order, the same cache entries and order).
_LEFT_EXTEND = True
#: ``_WordOverlapIndex.top_k_steps`` returns ``WordOverlapSearch.top_k_steps``' generator
#: itself instead of a generator of its own delegating to it (``yield from``): every
#: step of a retrieve (~10 a main-job retrieve, each a resume through every level of
#: the pipeline's generators) passes through one level less (~1.1% of a main-job
#: retrieve's samples were that level's). The numbering is then taken when the
#: generator is made rather than at its first step: every caller steps it at once, and
#: a numbering a renumbering retired in between still answers for the view (its readers
#: go on with it). False: the generator of its own, the path before it.
_DIRECT_STEPS = True
