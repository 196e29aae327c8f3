"""Tuning constants of the BM25 index: speed and memory only, never results.

Tests lower them (``monkeypatch.setattr(knobs, "_CHUNK", 4)``) to make every slicing path
run on small inputs; the modules read them as ``knobs._NAME`` at call time so that such a
patch reaches every user.
"""

from __future__ import annotations

from .. import kernels as _kernels

#: Relative slack on MaxScore's upper bounds, so that a different summation order of the
#: same floating-point terms can never prune a document that belongs to the top k.
_SLACK = 1e-9

#: Postings or candidates processed between two yields of a sliced retrieve (about
#: 0.05-0.1 ms of vectorised work), and the initial size of the length array.
_CHUNK = 4096

#: Slots of the dense accumulator scanned between two yields (about 0.1 ms).
_DENSE_CHUNK = 65536

#: Postings read between two yields while a reader brings a term's cached largest
#: saturation up to date (about 0.05 ms).
_BOUND_CHUNK = 8192

#: A term's cached saturations are recomputed when the average document length moved by
#: more than this factor since they were made (they stay valid bounds up to it).
_DRIFT = 1.02

#: Up to this many texts are scored exactly one by one (binary searches in Python),
#: more at once with numpy: the same floating-point operations either way.
_FEW = 64

#: Texts scored exactly one by one between two yields.
_FEW_STEP = 4

#: After the essential terms, the next term is accumulated whole while its posting list
#: is shorter than the candidates over this ratio (else looked up for each candidate).
_UPDATE_RATIO = 0.25

#: Term numbers below this pack into int32 (``array('i')``) with a frequency; groups
#: made after the vocabulary outgrew it pack into int64 (``array('q')``).
_NARROW = 1 << 23

#: The compiled core's first theta comes from one step of the lists of this many terms,
#: those with the highest bounds.
_SEEDS = 1

#: The compiled core splits the query's terms cost-aware: the non-essential ones (looked
#: up for candidates, never walked) are chosen greedily by bound per posting, so that the
#: long lists of common terms are looked up and only cheap lists walked; False: by bound
#: alone (MaxScore's split, the driver before it).
_COST_SPLIT = True

#: A query run to its end at once (``BM25Index.top_k``, ``top_k_terms``: no slices, no
#: owner between two steps) with the core's heap of records drives the walk in one call
#: after the seeding (``Bm25Daat.drive(to_end=True)``: each step of ``4 * _CHUNK``
#: postings of work, the split made again between two, in C), not one call a step from
#: Python. The same steps and results; False: a call a step (the sliced path's, always).
_WHOLE_DRIVE = True

#: A query run to its end at once (as ``_WHOLE_DRIVE``) whose index has the newest
#: statistics for its snapshot, with the core's heap of records and the block bounds
#: not built (``_NO_BLOCKS``), takes one short path from its weights to the core's
#: calls (``MaxScoreSearch.drained``: the same terms, weights, bounds and calls, no
#: generator, no ``_Exact``, no ``Bm25Daat`` and its Python checks, the C code's own
#: kept). The same results; False: the sliced search drained (the path before).
_QUERY_FAST = True

#: A sliced query (``top_k_steps``: a reader between whose steps the owner may write)
#: whose index has the newest statistics for its snapshot, on the same conditions as
#: ``_QUERY_FAST`` but the drain, takes that short path's set-up and its core calls in
#: slices (``MaxScoreSearch._fast_steps``, ``kernels.bm25_query_steps``): the lists and
#: statistics taken before the first yield, the bounds brought up to date in slices, no
#: generator per step, no ``_Exact``, no ``Bm25Daat`` and its Python checks; and where the
#: caller sends its slice's end at a yield (``Memory.retrieve``: ``_run_sliced``), each
#: core call walks whole steps until then (one call a slice, its scratch made once a
#: call), not one step of ``4 * _CHUNK`` postings a call. The same calls' results, so
#: the same top-k; False: ``_core_steps`` (the path before).
_SLICED_FAST = True

#: On that short path with one seed term (``_SEEDS``), the seeding and the walk to its
#: end are one core call (``bm25_daat``'s ``more & 4096``), not two. The same work and
#: results; False: two calls.
_ONE_CALL = True

#: On that short path, the windowed walk's scratch (a window's scores and marks, 40 KiB,
#: and the table of parts at a frequency of 1 with its 256 divisions) is made once a
#: core call, not once a step (``bm25_daat``'s ``more & 8192``; ~9 steps a question at
#: 1M). The same results; False: once a step.
_CALL_SCRATCH = True

#: A query run to its end at once on the short path (``_QUERY_FAST``: no slices, so
#: nothing bounds the time between two windows) walks windows this many groups wide
#: (at most 65,536, the core's widest), not ``_CHUNK``'s 4,096 (the sliced path's,
#: unchanged), in steps of four times as many postings of work: a quarter as many
#: windows, each with its per-term set-up, cut and scan of the marks, and the offers,
#: and a quarter as many splits of the terms between steps. The same results (a
#: window's width and a step's work are choices of speed only). Taken on an AMD CPU
#: only (``kernels.CPU_IS_AMD``, with ``_DRAIN_WINDOW_AMD_ONLY``): measured on this
#: project's AMD EPYC with AVX-512 (Zen 4) at 1M, best of 3, the plain questions' CPU
#: -2 to -5% and the tool results' -6 to -9% (8,192 and 65,536 groups: less); the
#: bench's single runs x0.99-1.02 and x1.02-1.15 at p50 (docs/benchmarks.md, "BM25 at
#: 1M, part 15"). Not measured on Intel. ``_CHUNK`` or below: the windows before.
_DRAIN_WINDOW = 16384

#: ``_DRAIN_WINDOW`` is taken only where ``kernels.CPU_IS_AMD``; False: on every CPU.
_DRAIN_WINDOW_AMD_ONLY = True

#: With the cost-aware split, the first theta comes from this many groups of the seed
#: term's list at most (or the query's limit, if more); without, one step's worth.
_SEED_ROOM = 128

#: With the cost-aware split, an unweighted query (no recency, no prior) with a limit up
#: to ``_C_OFFER_MAX`` lets the core offer the groups it finds to a heap of records in C
#: (``Bm25Daat.drive``), so that theta rises within a step; False: the groups come back
#: to Python each step and are offered there (the driver before, kept for side-by-side
#: benchmarks and as the reference of the tests).
_C_OFFER = True

#: The largest limit whose heap the core keeps (its arrays are made at full size).
_C_OFFER_MAX = 4096

#: With the cost-aware split, the core's walk over a window asks the memory for the length
#: of the group 16 postings ahead of the one it adds (``__builtin_prefetch``): a list is
#: read in order, but the lengths it needs are scattered over the length array (4 MB at a
#: million groups). The same results; False: no prefetch (the walk before, kept for
#: side-by-side benchmarks).
_PREFETCH_WALK = True

#: With the record heap in C (``_C_OFFER``), a step may find up to ``_CHUNK`` groups, and
#: the walk's windows are that wide (at most 4,096 groups, the core's window): a quarter as
#: many windows, each with its per-term set-up, its scan of the marks and its offers, as at
#: ``_CHUNK // 4`` (1,024), the room of the steps whose groups come back to Python. The
#: same results; False: ``_CHUNK // 4`` there too (the windows before, kept for
#: side-by-side benchmarks).
_WIDE_WINDOWS = True

#: With the cost-aware split, the core takes non-essential terms (looked up, not walked)
#: only while their bounds sum below this fraction of theta, not up to theta itself: with
#: the bounds close to theta nearly every group the walk meets may still reach it and
#: gets a lookup (at 300k, 14,400 marked groups a LoCoMo question at the final theta,
#: 1,600 with one more list walked). Any fraction in (0, 1] gives the same results; 1.0:
#: the split before (kept for side-by-side benchmarks).
_SPLIT_ROOM = 0.8

#: With the cost-aware split, the reader does not extend a term's cache of block bounds
#: (``_Term.blocks``: per 64 postings the largest frequency and the smallest length),
#: which only the split by bound (``_COST_SPLIT = False``) reads: building it read every
#: posting and its group's length once more, on the first retrieve of each term (and of
#: its postings added since). The same results; False: built anyway (the path before,
#: kept for side-by-side benchmarks).
_NO_BLOCKS = True

#: With the record heap in C (``_C_OFFER``), a group whose exact score ties with the
#: heap's worst record is passed over without reading its records when the index's
#: ``_first_seq`` (the lowest seq its records ever had) is not below that record's seq:
#: only a lower seq could enter. At 1M each text is stored about 133 times, and nearly
#: every group offered is such a copy, each a chain of cache misses (the table's slot,
#: the group, its records, a record, its seq). The same results; False: every such group's
#: records read (the offers before, kept for side-by-side benchmarks).
_TIE_SKIP = True

#: Read when an index is made: ``_first_seq`` as int32, not int64 (4 bytes a group, 4 MB
#: at a million groups). A seq is kept as itself inside int32, int32's largest above it
#: and int32's lowest (unknown) at or below that (``postings.first_seq_floor``): never
#: above the group's lowest seq but for that mark, which the core reads as unknown (no
#: skip), so ``_TIE_SKIP``'s check stays right, and only groups whose lowest seq is past
#: 2**31 - 1 or at or below -2**31 lose the skip (their records read, as with
#: ``_TIE_SKIP`` off). The same results; False: int64 (the layout before, kept for
#: side-by-side measurements).
_FIRST_SEQ32 = True

#: The core's lookups (a galloping then binary search per non-essential term for each
#: group that may reach theta) prefetch their next probes: the gallop's next one and both
#: of the binary search's next midpoints, before the load they wait for. In a long list
#: (a common word's, hundreds of thousands of postings at 1M) each probe is a cache miss
#: that the next depends on; `perf` put about a third of the core's time on them. The
#: same results; False: no prefetch (the searches before, kept for side-by-side
#: benchmarks).
_PREFETCH_SEEK = True

#: With the cost-aware split, the core's windowed walk of the essential lists (about 100k
#: postings a LoCoMo question at 1M, most of a retrieve) runs a tight loop: the term's
#: fields in registers (the extension is built with -fno-strict-aliasing, so the loop
#: before reloaded them after every store to the score array), one loop per width of the
#: frequencies, one compare for the window's end and the range checks, and each group's
#: mark set without a branch (its bit set again at every posting past theta). The same
#: results; False: the loop before (kept for side-by-side benchmarks).
_TIGHT_WALK = True

#: The core's seeks (the lookups into the non-essential lists, the exact scores' and the
#: split by bound's) start from a guess: the position interpolated between the cursor's
#: group and the list's last, then gallop from it, forward or back, and bisect. A common
#: word's list at 1M (hundreds of thousands of postings, its groups spread about evenly)
#: was searched by a gallop from the cursor, every probe a cache miss the next depended
#: on; `perf` put about a third of the core's time in the lookups. The same positions, so
#: the same results; False: the gallop from the cursor (kept for side-by-side benchmarks).
_INTERP_SEEK = True

#: With ``_TIGHT_WALK``, the walk adds eight postings at a time (AVX-512: the groups and
#: frequencies loaded, the lengths and partial scores gathered, the sums scattered back,
#: the marks from a mask) where the CPU has it, the scalar loop for the rest of a window.
#: The same IEEE operations lane by lane, so the same partial scores bit for bit; False,
#: or a CPU without AVX-512: the scalar tight loop (kept for side-by-side benchmarks).
_SIMD_WALK = True

#: With ``_SIMD_WALK``, an AMD CPU (``kernels.CPU_IS_AMD``: ``/proc/cpuinfo``'s vendor)
#: runs the scalar loop all the same: on this project's AMD EPYC with AVX-512 the
#: eight-lane walk (its gathers and scatters, its prefetch) took more time than the
#: scalar loop with ``_WALK_ONES`` and ``_MARK_CUT`` (docs/benchmarks.md, "BM25 at 1M,
#: part 10"). The same results; False: the eight-lane walk wherever AVX-512 is.
_SCALAR_ON_AMD = True

#: With ``_INTERP_SEEK`` and the cost-aware split, a window's marked groups are looked up
#: in order, and before the lookups of one, those of the marked group two on are asked
#: for: in each non-essential list, the posting (and its frequency) where the
#: interpolated guess will land, the one cache miss left of a lookup into a long list.
#: The same results; False: no prefetch (kept for side-by-side benchmarks).
_PREFETCH_LOOKUPS = True

#: With ``_TIGHT_WALK``, the walk reads each group's one-byte length code
#: (``BM25Index._codes``, 1 MB at a million groups: the L2 holds it, where the int32
#: lengths' 4 MB do not) and the saturation's denominator from a table of 256 per call,
#: at the code's lowest length (the exact length below 128): its partial scores are the
#: exact ones or above them, so it marks every group it marked before, and perhaps a few
#: more, which the lookups and the exact scores (from the lengths) then sort out. The
#: same results; False: the walk reads the lengths (kept for side-by-side benchmarks).
_LENGTH_CODES = True

#: With ``_LENGTH_CODES``, the lookups of a marked group into the non-essential lists take
#: its saturations from its length code too (the byte the walk just read), not from its
#: int32 length: `perf` put ~40% of the windowed driver's own time on that one read, a
#: cache miss for nearly every marked group (the walk over the codes no longer brings
#: the lengths in), where ~1% of them reach an exact score. Upper bounds, as the walk's:
#: the groups that may still reach theta after the lookups read their length for the
#: exact score, so the same results. False: the lookups read the lengths (kept for
#: side-by-side benchmarks).
_LOOKUP_CODES = True

#: With ``_INTERP_SEEK``, the seeding (the exact scores of the first groups of the seed
#: term's list, for a first theta) asks for the lookups of the seed's group two on, in
#: every other list, and its length, before those of the current one: `perf` put most of
#: the core's entry function's own time (~6% of a question) on those misses. The same
#: results; False: no prefetch (kept for side-by-side benchmarks).
_PREFETCH_SEEDS = True

#: A window of the cost-aware walk (4,096 groups, a 32 KiB score array) in which fewer
#: postings were walked than an eighth of its width has only their slots cleared after
#: it, not the whole array (`memset` was ~4.5% of a question: ~250 windows of ~300
#: postings each at 1M). The same results; False: the whole array cleared (kept for
#: side-by-side benchmarks).
_SPARSE_CLEAR = True

#: With the record heap in C (``_C_OFFER``), the groups a window offers have their first
#: seqs (``_TIE_SKIP``'s read, 8 MB at a million groups) and their slots in the group
#: table prefetched at once, before the first is offered: read best first, one after
#: another, each was a cache miss (`perf`: most of the offers' ~6% of a question). The
#: same results; False: no prefetch (kept for side-by-side benchmarks).
_PREFETCH_OFFERS = True

#: With ``_LENGTH_CODES``, the walk asks for no code ahead (``_PREFETCH_WALK``'s
#: prefetch) where it runs its scalar loop, on a CPU without AVX-512 (this project's
#: AMD EPYC): the codes' 1 MB are read with enough loads in flight without it, and the
#: prefetch took six of the loop's ~30 instructions a posting. The eight-lane walk keeps
#: its prefetch. The same results; False: the prefetch as ``_PREFETCH_WALK`` says.
_SCALAR_NO_PREFETCH = True

#: The windowed walk over the codes, where it runs its scalar loop without a prefetch (a
#: CPU without AVX-512): a posting of frequency 1 takes its part from a table by length
#: code made once a step for each walked term (256 parts: the walk's own operations, the
#: same values bit for bit) instead of a conversion and a division. The same results;
#: False: every part computed (kept for side-by-side benchmarks).
_WALK_ONES = True

#: The same walk marks a group by comparing its partial score with the least score that
#: reaches theta with the non-essential bounds (found once a window and term, exactly:
#: the same marks) instead of computing ``score * up + rest`` a posting. The same
#: results; False: the expression (kept for side-by-side benchmarks).
_MARK_CUT = True

#: With ``_MARK_CUT`` and the walk over the codes, the walk runs the scalar loop (also
#: where the CPU has AVX-512: instead of the eight-lane walk, and without a prefetch) and
#: sets no marks (the mark's read-modify-write of the bitset was ~6 of its ~24
#: instructions a posting): after a window's walk its marks are
#: found from its scores, in the pass that clears a sparse window's slots by its postings
#: (a marked group's score kept aside for its lookups) or by a scan of a dense window's
#: 4,096 scores, against the window's cut. A group whose final partial score reaches the
#: cut is one the walk marked; one the walk marked and the scan does not has a final score
#: below the cut, which the lookups give up on before any work: the same results. On this
#: project's AMD EPYC with AVX-512, -9.5% of a plain question's CPU at 100k
#: (docs/benchmarks.md, "BM25 at 1M, part 10"); on its Intel Xeon with AVX-512, -6 to
#: -8% at 1M against the eight-lane walk ("part 11"), so no per-CPU choice is needed
#: while it is on. False: the walk marks, the eight-lane walk where the CPU has it (kept
#: for side-by-side benchmarks).
_SCAN_MARKS = True

#: On the short path (``_QUERY_FAST``) with ``_SCAN_MARKS``, on a CPU without AVX-512
#: (``kernels.CPU_HAS_AVX512`` False: the walk is the scalar loop either way), for a
#: query of at most ``_SPARSE_MARKS_TERMS`` terms the index knows, a window
#: expected sparse (its essential lists' postings left fewer than a quarter of the
#: groups from its first on) is walked marking by the cut (``_MARK_CUT``), not scanned
#: after; a denser one is scanned. On this project's AMD EPYC without AVX-512, marking
#: by the cut took 4.1% less of the LoCoMo questions' CPU at 1M than the scan (lower in
#: each of 21 paired rounds), and this choice by window 3.6-6.3% less than the scan (9
#: of 9), while the tool results' long queries were 1.0-3.4% slower with it (8 of 8;
#: docs/benchmarks.md, "BM25 at 1M, part 14"). The same marks, so the same results;
#: False: every window scanned (``bm25_daat``'s ``more & 16384``).
_SPARSE_MARKS = True

#: ``_SPARSE_MARKS`` applies to queries of at most this many terms (the LoCoMo questions
#: have 3-20 distinct words, 194 of 200 at most 16; the tool results a median of 45).
_SPARSE_MARKS_TERMS = 16

#: With the cost-aware split, the longest posting lists (at least ``_DENSE_MIN`` postings
#: and one group in ``_DENSE_RATIO``) also keep their frequencies by group number, two
#: bits a group (``_Term.dense``: 0 absent, 1 or 2 the frequency, 3 three or more), kept
#: up to date by the owner every ``_DENSE_STEP`` new groups; the core's lookups into
#: them read that one byte instead of searching the list (an interpolated guess and the
#: frequency after it, two cache misses into a list of hundreds of thousands of postings
#: at 1M), and search the list only for a 3 or a group newer than the array. 256 KB a
#: list at a million groups (~23 B an entry in all at 1M). The same results; False: no
#: arrays made, none read (kept for side-by-side benchmarks).
_DENSE_TFS = True

#: A list gets a dense array from this many postings on (and drops it below half of it)...
_DENSE_MIN = 1 << 14

#: ... and while at least one group in this many has the term (one in twice as many to
#: keep it): at 10 (q52), 51 lists of the bench's 1M plain texts, 13.4 MB, *what* (the
#: commonest question word, one text in 9.4) among them; at 8 (dense44), 32 lists, 8.4
#: MB; at 16 (before dense44), 87 lists, 22.8 MB. On Zen 4, against 8: 10 takes the
#: questions' CPU down ~6% (16: ~7%), the tool results' 0-6% (16: 14-20%), for ~5 MB
#: (docs/benchmarks.md, "BM25 at 1M, part 16"; paid for by ``_FIRST_SEQ32``).
_DENSE_RATIO = 10

#: New groups between two updates of the dense arrays (the groups after the last update
#: are sought in the lists' tails, which are short and read in order).
_DENSE_STEP = 4096

#: A group that has had one record keeps the record itself in its ``_recs`` slot, not
#: a list of one (80 bytes: the list object and its item buffer, and an object the
#: collector tracks): at 1M distinct texts 80 MB. The second record makes it a list.
#: The same results; False: a list from the first record (the layout before, kept for
#: side-by-side measurements and the tests that drive both).
_SINGLE_RECORD = True
#: A new group and its term array leave the cyclic collector's lists
#: (``kernels.gc_untrack``; neither is ever in a reference cycle): two tracked objects
#: per distinct text less for a full collection to walk. The same results; False: left
#: tracked (the layout before).
_UNTRACK = True

#: Read when an index is made: every group's term numbers live in one append-only array
#: of the index (``postings._TermPool``, uint16 while at most 65,536 term numbers were
#: given, deleted terms' included: numbers are not reused), found by the group's number,
#: not in an ``array`` object per group of the numbers packed with their frequencies
#: (its 64-byte header, its buffer's own allocation and 4 bytes a term: ~145 bytes a
#: distinct text at 1M on the corpus); a frequency is looked up in the term's posting
#: list. Purged groups' terms are dropped by a compaction once ``_POOL_DEAD`` of the
#: pool is theirs. The same results; False: an array per group (the layout before, kept
#: for side-by-side measurements and the tests that drive both).
_TERM_POOL = True

#: A pool is compacted once its purged terms are at least this fraction of it.
_POOL_DEAD = 0.25

#: Read when an index is made, with ``_TERM_POOL``: no ``_Group`` object per distinct
#: text. The group table's slot of group ``num`` holds the group's records themselves
#: (its one record, or a list of them by seq; None once purged), the document map gives
#: the group's number, and the count of purged records still in a group's list is kept
#: in a dict of the groups that have any (most have none): the 64-byte object (and the
#: slot's reference to it) less a distinct text. The same results; False: a ``_Group``
#: per text (the layout before, kept for side-by-side measurements and the tests that
#: drive both).
_GROUP_COLUMNS = True

#: Read when an index is made, with ``_GROUP_COLUMNS`` and the word-overlap core built:
#: an untagged text's group number is found in the core's ``GroupTable`` (word
#: overlap's: a 32-bit tag of the text's hash beside the number, the text read back from
#: the group's table slot: a record's ``entry.memory``, or a ``_Recs``'s ``text``), not
#: in a dict (its slot and the number's int object: ~60 bytes a distinct text at 1M);
#: tagged documents stay in a dict. The same results; False: a dict for every document.
_GROUP_TABLE = True

#: The index's large long-lived arrays (the per-group lengths, codes, liveness and
#: first sequence numbers; the posting lists and the term pool once they reach 2 MiB)
#: are asked of the kernel as transparent huge pages (``kernels.huge_advise``:
#: ``madvise(MADV_HUGEPAGE)`` on their whole 2 MiB pages, again whenever one is
#: reallocated). The walk's reads of them are random, and with 4 KiB pages at 1M
#: groups most missed the TLB. On by default where the kernel's THP mode is
#: ``madvise`` or ``always``; a refused advice is ignored. The same results; False:
#: no advice, the path before (branch ``huge27``).
_HUGE_PAGES = _kernels.HUGE_PAGES_USEFUL
