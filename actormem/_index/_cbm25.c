/* The compiled core of the BM25 index (optional: actormem/_index/kernels.py reports
 * whether it is built, and the index runs its pure-Python reference path without it).
 *
 * Two entry points, both over the index's own Python objects and arrays:
 *
 * - bm25_add_terms: the owner's per-text term loop of BM25Index._new_group (count the
 *   terms in first-occurrence order, find or make each term's posting list, append the
 *   group and its frequency, count the df, pack the term numbers), the same operations
 *   as the Python loop in the same order;
 * - bm25_daat: the reader's query driver, document at a time over the query's posting
 *   lists: MaxScore (Turtle & Flood 1995: the terms whose upper bounds sum below the
 *   threshold theta only get looked up for the candidates of the others) with block-max
 *   windows (Ding & Suel, SIGIR 2011; Lucene's block-max MaxScore): each complete block of
 *   BLOCK postings has its largest frequency and smallest document length, whose
 *   saturation bounds every posting of the block, so a window of groups whose block
 *   bounds sum below theta is skipped whole; or, with a `sticky` flag array (the
 *   default driver, window_steps), a cost-aware split of the terms and the essential
 *   lists walked term at a time over windows of groups. Each call does a bounded amount
 *   of work (budget) and keeps its state in the caller's arrays: the caller yields between
 *   calls, raises theta from the exact record scores, and no buffer is held across calls
 *   (the owner appends to the arrays in between). Groups that can reach theta are
 *   returned (or, with `offer`, offered to the caller's heap of records here, best
 *   first after each window, so that theta rises within a call) with their exact score, term by term in the query's order with the
 *   reference's IEEE operations (built with -ffp-contract=off), so bit for bit.
 *
 * Arguments are checked by kernels.py before they get here; the checks below repeat
 * what memory safety needs (formats, lengths, index ranges) and raise ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_kernels_common.h"

/* Postings per block of the block-max bounds (kernels.BM25_BLOCK). */
#define BLOCK 64

/* One-byte length codes (postings.length_codes, knobs._LENGTH_CODES): a length below 128
 * is its own code; above, four bits of mantissa per octave (128 + 16 (p - 7) + the four
 * bits after the leading one, p the leading one's place, up to 14), 255 from 31,744 on.
 * code_floor(code) is the lowest length of the code: at most every length that has it. */
#define BM25_CODES 256

static inline int64_t
code_floor(int code)
{
    if (code < 128) return code;
    int p = 7 + (code - 128) / 16, m = (code - 128) % 16;
    return (int64_t)(16 + m) << (p - 4);
}

PyDoc_STRVAR(bm25_code_floors_doc,
"bm25_code_floors() -> list[int]: the lowest length of each of the 256 length codes, as\n"
"the core's walk takes them (for tests).");

static PyObject *
bm25_code_floors(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(BM25_CODES);
    if (!out) return NULL;
    for (int k = 0; k < BM25_CODES; k++) {
        PyObject *v = PyLong_FromLongLong(code_floor(k));
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, v);
    }
    return out;
}


/* ------------------------------------------------------------------ blocks */

PyDoc_STRVAR(bm25_blocks_doc,
"bm25_blocks(groups, tfs, lengths, first, stop, out) -> None\n\n"
"For each complete block k in first..stop of BLOCK postings: out[2(k - first)] the\n"
"largest frequency and out[2(k - first) + 1] the smallest document length of its\n"
"groups. O((stop - first) * BLOCK).");

static PyObject *
bm25_blocks(PyObject *self, PyObject *args)
{
    PyObject *o_groups, *o_tfs, *o_len, *o_out;
    Py_ssize_t first, stop;
    if (!PyArg_ParseTuple(args, "OOOnnO", &o_groups, &o_tfs, &o_len, &first, &stop, &o_out)) {
        return NULL;
    }
    Py_buffer groups, tfs, len, out;
    PyObject *result = NULL;
    if (get(o_groups, &groups, K_I32, 0, "groups") < 0) return NULL;
    if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) goto e1;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e2;
    if (get(o_out, &out, K_I32, 1, "out") < 0) goto e3;
    if (first < 0 || stop < first || stop > LEN(groups) / BLOCK || stop > LEN(tfs) / BLOCK ||
        LEN(out) < 2 * (stop - first)) {
        PyErr_SetString(PyExc_ValueError, "blocks out of range");
        goto done;
    }
    {
        const int32_t *g = (const int32_t *)groups.buf, *ln = (const int32_t *)len.buf;
        int32_t *o = (int32_t *)out.buf;
        Py_ssize_t nlen = LEN(len);
        for (Py_ssize_t k = first; k < stop; k++) {
            int32_t top = 0, low = INT32_MAX;
            for (Py_ssize_t i = k * BLOCK; i < (k + 1) * BLOCK; i++) {
                int32_t tf = tfs.itemsize == 1 ? ((const uint8_t *)tfs.buf)[i]
                                               : ((const int32_t *)tfs.buf)[i];
                int32_t num = g[i];
                if (num < 0 || num >= nlen) {
                    PyErr_SetString(PyExc_ValueError, "group number out of range");
                    goto done;
                }
                if (tf > top) top = tf;
                if (ln[num] < low) low = ln[num];
            }
            o[2 * (k - first)] = top;
            o[2 * (k - first) + 1] = low;
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
e3:
    PyBuffer_Release(&len);
e2:
    PyBuffer_Release(&tfs);
e1:
    PyBuffer_Release(&groups);
    return result;
}

/* ------------------------------------------------------------------ dense */

PyDoc_STRVAR(bm25_dense_fill_doc,
"bm25_dense_fill(bits, groups, tfs, start, stop) -> None\n\n"
"Set the two-bit frequency codes of postings start..stop of a list in bits (uint8,\n"
"four groups a byte: bits[num >> 2] >> 2 (num & 3) & 3 is 0 absent, 1 or 2 the\n"
"frequency, 3 three or more, or a frequency below 1), OR-ed into what is there. Every\n"
"group is checked inside bits before any byte is written. O(stop - start).");

static PyObject *
bm25_dense_fill(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_bits, *o_groups, *o_tfs;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OOOnn", &o_bits, &o_groups, &o_tfs, &start, &stop)) return NULL;
    Py_buffer bits, groups, tfs;
    PyObject *result = NULL;
    if (get(o_bits, &bits, K_U8, 1, "bits") < 0) return NULL;
    if (get(o_groups, &groups, K_I32, 0, "groups") < 0) goto e1;
    if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) goto e2;
    if (start < 0 || stop < start || stop > LEN(groups) || stop > LEN(tfs)) {
        PyErr_SetString(PyExc_ValueError, "postings out of range");
        goto done;
    }
    {
        const int32_t *g = (const int32_t *)groups.buf;
        uint8_t *b = (uint8_t *)bits.buf;
        const int64_t nbits = (int64_t)LEN(bits);
        for (Py_ssize_t i = start; i < stop; i++) {
            if (g[i] < 0 || (g[i] >> 2) >= nbits) {
                PyErr_SetString(PyExc_ValueError, "group number beyond the bits");
                goto done;
            }
        }
        for (Py_ssize_t i = start; i < stop; i++) {
            double tf = tf_at(&tfs, i);
            unsigned code = tf >= 1.0 && tf < 3.0 ? (unsigned)tf : 3u;
            b[g[i] >> 2] |= (uint8_t)(code << ((g[i] & 3) * 2));
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&tfs);
e2:
    PyBuffer_Release(&groups);
e1:
    PyBuffer_Release(&bits);
    return result;
}

/* ------------------------------------------------------------------ driver */

typedef struct {
    double wi, ub, at; /* at: the frequency at the pivot, -1 if none */
    Py_buffer groups, tfs, blocks, dense;
    int have; /* buffers taken (to release) */
    int have_dense; /* the dense buffer taken (to release) */
    const int32_t *g, *blk;
    Py_ssize_t count, nblk, cur, xcur; /* xcur: the windowed driver's exact-score seek */
    /* With more & 16 (knobs._DENSE_TFS), a long list's frequencies by group number, two
     * bits a group (0 absent, 1 or 2 the frequency, 3 three or more: sought in the list),
     * for the groups below upto; the list's postings from dpos on are those of the groups
     * at or above upto. NULL: none (the list is sought). */
    const uint8_t *bits;
    Py_ssize_t upto, dpos;
} term_t;

/* The two-bit frequency code of group num (< t->upto) in t's dense array. */
static inline unsigned
dense_code(const term_t *t, int64_t num)
{
    return (t->bits[num >> 2] >> ((num & 3) * 2)) & 3u;
}

/* Whether a lookup of group num in t is answered by its dense array: then *tf is its
 * frequency there (-1 if absent). Else (no array, a group at or above upto, or a code
 * of 3) the list is to be sought, from *from on (the cursor, or dpos for a group past
 * upto: every posting before dpos is of a group below upto). */
static inline int
dense_lookup(const term_t *t, int64_t num, double *tf, Py_ssize_t *from)
{
    *from = t->cur;
    if (!t->bits) return 0;
    if (num < t->upto) {
        unsigned v = dense_code(t, num);
        if (v < 3) {
            *tf = v ? (double)v : -1.0;
            return 1;
        }
        return 0;
    }
    if (t->dpos > *from) *from = t->dpos;
    return 0;
}

static inline double
tf_of(const term_t *t, Py_ssize_t i)
{
    return tf_at(&t->tfs, i);
}

/* The first position >= cur of a posting whose group is >= target (galloping, then
 * binary search); count if none. */
/* Whether seek prefetches ahead (set per bm25_daat call; the module runs under the GIL). */
static int seek_prefetch;

/* Whether seek starts from an interpolated guess (set per bm25_daat call). */
static int seek_interp;

/* Lists shorter than this past the cursor are galloped from it, never interpolated. */
#define INTERP_MIN 64

static inline Py_ssize_t
seek(const int32_t *g, Py_ssize_t cur, Py_ssize_t count, int64_t target)
{
    if (cur >= count || g[cur] >= target) {
        return cur;
    }
    Py_ssize_t lo = cur, step = 1, hi = cur + 1; /* g[lo] < target */
    if (seek_interp && count - cur > INTERP_MIN) {
        /* With seek_interp (knobs._INTERP_SEEK): the group numbers of a list are spread
         * about evenly (texts arrive in no order the terms follow), so the position of
         * target is guessed between the cursor's group and the list's last, and the
         * search gallops from the guess, forward or back, then bisects as below: the
         * same first position >= cur of a group >= target, in a probe or two near it
         * instead of a gallop from the cursor whose every probe misses the caches. */
        int64_t first = g[cur], last = g[count - 1];
        if (last < target) return count;
        /* first < target <= last: a fraction in (0, 1] of the positions past cur. */
        Py_ssize_t span = count - 1 - cur;
        double frac = (double)(target - first) / (double)(last - first);
        Py_ssize_t pos = cur + (Py_ssize_t)(frac * (double)span);
        if (pos <= cur) pos = cur + 1;
        if (pos > count - 1) pos = count - 1;
        if (g[pos] < target) { /* forward from pos */
            lo = pos;
            hi = pos + 1;
            step = 1;
            while (hi < count && g[hi] < target) {
                lo = hi;
                step *= 2;
                hi = pos + step;
            }
            if (hi > count) hi = count;
        } else { /* back from pos: g[pos] >= target, g[cur] < target */
            hi = pos;
            step = 1;
            lo = pos - 1;
            while (lo > cur && g[lo] >= target) {
                hi = lo;
                step *= 2;
                lo = pos - step < cur ? cur : pos - step;
            }
        }
        goto bisect;
    }
    while (hi < count && g[hi] < target) {
        lo = hi;
        step *= 2;
        hi = cur + step;
        /* With seek_prefetch, the gallop's probe after this one (beyond a cache line or
         * so) and, below, both halves' next midpoints are asked for before the load they
         * depend on: the probes of a long list's lookups miss the caches one after the
         * other. Only addresses inside the list. */
        if (seek_prefetch && step >= 16 && cur + 2 * step < count) {
            __builtin_prefetch(&g[cur + 2 * step]);
        }
    }
    if (hi > count) hi = count;
bisect:
    while (hi - lo > 1) { /* g[lo] < target, and g[hi] >= target or hi == count */
        Py_ssize_t half = (hi - lo) / 2, mid = lo + half;
        if (seek_prefetch && half >= 16) {
            __builtin_prefetch(&g[lo + half / 2]);
            __builtin_prefetch(&g[mid + half / 2]);
        }
        if (g[mid] < target) lo = mid;
        else hi = mid;
    }
    return hi;
}

static term_t *by_ub_terms;

static int
by_ub(const void *x, const void *y)
{
    Py_ssize_t i = *(const Py_ssize_t *)x, j = *(const Py_ssize_t *)y;
    double a = by_ub_terms[i].ub, b = by_ub_terms[j].ub;
    if (a < b) return -1;
    if (a > b) return 1;
    return (i > j) - (i < j);
}

/* The bound per posting left in the list (ascending): the cost-aware split's order. */
static int
by_ratio(const void *x, const void *y)
{
    Py_ssize_t i = *(const Py_ssize_t *)x, j = *(const Py_ssize_t *)y;
    const term_t *s = &by_ub_terms[i], *t = &by_ub_terms[j];
    double a = s->ub / (double)(s->count - s->cur + 1), b = t->ub / (double)(t->count - t->cur + 1);
    if (a < b) return -1;
    if (a > b) return 1;
    return (i > j) - (i < j);
}

/* Order the terms for MaxScore: ord[0..ne) the non-essential ones (their bounds sum
 * below theta), ascending by bound (looked up for a candidate from the last), then the
 * essential ones; prefix[i] the sum of the first i bounds. Without `sticky`, MaxScore's
 * split: the terms with the lowest bounds. With it (one flag per term, kept between
 * calls), the cost-aware split: greedily, the terms with the lowest bound per posting
 * left, so that long lists of common terms become lookups and only the cheap lists are
 * walked; a term once non-essential stays so (its cursor lags behind the pivot, and the
 * groups it skipped were below an earlier, lower theta), so the flagged terms go first.
 * Returns ne. O(q log q). */
static Py_ssize_t
split_terms(term_t *T, Py_ssize_t q, double theta, uint8_t *sticky, Py_ssize_t *ord,
            double *prefix, double room)
{
    Py_ssize_t ne = 0;
    for (Py_ssize_t i = 0; i < q; i++) ord[i] = i;
    by_ub_terms = T;
    if (!sticky) {
        qsort(ord, q, sizeof(Py_ssize_t), by_ub);
        prefix[0] = 0.0;
        for (Py_ssize_t i = 0; i < q; i++) prefix[i + 1] = prefix[i] + T[ord[i]].ub;
        while (ne < q && prefix[ne + 1] < theta) ne++;
        return ne;
    }
    qsort(ord, q, sizeof(Py_ssize_t), by_ratio);
    double sum = 0.0;
    /* The greedy stops short of theta (room < 1): with the non-essential bounds summing
     * close to it, nearly every group the walk meets can still reach theta and costs a
     * lookup; walking one more list is cheaper than looking up for all of those. Any
     * split whose bounds sum below theta is exact; this one's sum is only lower. */
    double cap = theta > 0.0 ? room * theta : theta;
    for (int pass = 0; pass < 2; pass++) { /* the sticky ones first, then the greedy */
        for (Py_ssize_t i = 0; i < q; i++) {
            Py_ssize_t k = ord[i];
            if ((sticky[k] == 1) != (pass == 0)) continue;
            if (pass == 0 || sum + T[k].ub < cap) {
                sum += T[k].ub;
                sticky[k] = 2; /* chosen in this call */
            }
        }
    }
    Py_ssize_t e = q;
    for (Py_ssize_t i = q - 1; i >= 0; i--) { /* the essential ones to the end, in order */
        Py_ssize_t k = ord[i];
        if (sticky[k] != 2) ord[--e] = k;
    }
    for (Py_ssize_t k = 0; k < q; k++) {
        if (sticky[k] == 2) ord[ne++] = k;
    }
    qsort(ord, ne, sizeof(Py_ssize_t), by_ub);
    prefix[0] = 0.0;
    for (Py_ssize_t i = 0; i < ne; i++) prefix[i + 1] = prefix[i] + T[ord[i]].ub;
    /* (Summed in this order the bounds may differ from the greedy's sum in the last
     * bits: the bounds' relative slack, far larger, covers that.) */
    for (Py_ssize_t i = 0; i < ne; i++) sticky[ord[i]] = 1;
    return ne;
}

/* MaxScore's lookups for group num with partial score `partial` (denom the saturation's
 * denominator a_part + b_part * dl at its length dl, or, with the windowed driver's
 * length codes, at its code's lowest length: then each term's part is the exact one or
 * above it, an upper bound): the non-essential terms ord[ne - 1] down to ord[0] (largest
 * bound first), each sought from its position (its frequency there kept in `at`, -1 if
 * absent), while the partial score with the bounds of the terms left (prefix) can reach
 * theta. Returns the partial score with theirs, or -INFINITY once it cannot reach theta.
 * Adds the lookups to *work. */
static inline double
look_up(term_t *T, const Py_ssize_t *ord, Py_ssize_t ne, const double *prefix, int64_t num,
        double partial, double denom, double up, double theta, Py_ssize_t *work)
{
    for (Py_ssize_t j = ne - 1; j >= 0; j--) {
        if (partial * up + prefix[j + 1] < theta) {
            return -INFINITY;
        }
        term_t *t = &T[ord[j]];
        *work += 1;
        double dtf;
        Py_ssize_t from;
        if (dense_lookup(t, num, &dtf, &from)) { /* one read, no search */
            t->at = dtf;
            if (dtf > 0.0) partial += t->wi * (dtf / (dtf + denom));
            continue;
        }
        t->cur = seek(t->g, from, t->count, num);
        t->at = -1.0;
        if (t->cur < t->count && t->g[t->cur] == num) {
            double tf = t->at = tf_of(t, t->cur);
            partial += t->wi * (tf / (tf + denom));
        }
    }
    return partial;
}

/* ------------------------------------------------------------------ offers */

/* The caller's heap of the k best records (unweighted scores: a record scores its
 * text's), for the driver to offer its groups to as it finds them, so that theta (the
 * k-th best record score) rises within a call, not only between two. Arrays of the
 * caller, kept between calls: hs (scores), hq (minus seq) and hr (a list of the
 * records), a min-heap on (score, -seq) of hn[0] <= limit entries; seen[0..hn[1]) the
 * groups the seeding offered, ascending (the main walk meets them again and skips
 * them: their records were offered once). */
typedef struct {
    PyObject *table, *accept, *hr; /* borrowed */
    int64_t version;
    double *hs;
    int64_t *hq, *hn, *seen;
    Py_ssize_t limit, seen_cap;
    int remember; /* the seeding: add the groups offered to seen */
    const int64_t *first; /* NULL, or a lower bound on each group's seqs (nfirst of them) */
    const int32_t *first32; /* or that bound as int32 (knobs._FIRST_SEQ32), NULL */
    Py_ssize_t nfirst;
    int ahead; /* offer_found prefetches each group's first seq and table slot */
    int columns; /* a table slot is the group's records: a list, or its one record */
} offer_t;

static PyObject *s_recs, *s_seq, *s_born, *s_died;

/* theta from the heap: its worst score once full, else -inf. */
static inline double
heap_theta(const offer_t *o)
{
    return o->hn[0] == o->limit ? o->hs[0] : -INFINITY;
}

static inline int
heap_less(const offer_t *o, Py_ssize_t i, Py_ssize_t j)
{
    return o->hs[i] < o->hs[j] || (o->hs[i] == o->hs[j] && o->hq[i] < o->hq[j]);
}

static inline void
heap_swap(offer_t *o, Py_ssize_t i, Py_ssize_t j)
{
    double s = o->hs[i];
    o->hs[i] = o->hs[j];
    o->hs[j] = s;
    int64_t q = o->hq[i];
    o->hq[i] = o->hq[j];
    o->hq[j] = q;
    PyObject **items = ((PyListObject *)o->hr)->ob_item, *r = items[i];
    items[i] = items[j];
    items[j] = r;
}

/* Put (score, negseq, rec) in the heap: pushed while it has room, else in place of the
 * worst (the caller checked that it beats it). */
static void
heap_put(offer_t *o, double score, int64_t negseq, PyObject *rec)
{
    Py_ssize_t n = o->hn[0], i;
    if (n < o->limit) {
        i = n;
        o->hn[0] = n + 1;
        o->hs[i] = score;
        o->hq[i] = negseq;
        PyList_SetItem(o->hr, i, Py_NewRef(rec)); /* steals; drops the None */
        while (i > 0 && heap_less(o, i, (i - 1) / 2)) {
            heap_swap(o, i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
        return;
    }
    o->hs[0] = score;
    o->hq[0] = negseq;
    PyList_SetItem(o->hr, 0, Py_NewRef(rec));
    i = 0;
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_less(o, l, m)) m = l;
        if (r < n && heap_less(o, r, m)) m = r;
        if (m == i) break;
        heap_swap(o, i, m);
        i = m;
    }
}

/* Reading a __slots__ attribute without the attribute machinery: for one type at a
 * time (the records' and the groups' classes), each name's slot offset, found through
 * the type's member descriptor; 0 if the name is not a plain object slot there (then
 * PyObject_GetAttr). The type is held, so its address cannot be reused. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[3];
} slots_t;

static slots_t rec_slots, group_slots;

/* obj.<names[i]> as a new reference, through the slot if the type has one. */
static inline PyObject *
slot_get(slots_t *cache, PyObject *obj, PyObject *const *names, int n, int i)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (cache->type != type) {
        Py_XSETREF(cache->type, (PyTypeObject *)Py_NewRef(type));
        for (int j = 0; j < n; j++) cache->off[j] = slot_offset(type, names[j]);
    }
    if (cache->off[i]) {
        PyObject *v = *(PyObject **)((char *)obj + cache->off[i]);
        if (v) return Py_NewRef(v);
    }
    return PyObject_GetAttr(obj, names[i]);
}

/* The int64 fields of the compiled Record (seq, born, died), per type as rec_slots. */
static slots_t rec_i64;

static int
attr_i64(PyObject *obj, int i, int64_t *out)
{
    PyObject *names[3] = {s_seq, s_born, s_died};
    PyTypeObject *type = Py_TYPE(obj);
    if (rec_i64.type != type) {
        Py_XSETREF(rec_i64.type, (PyTypeObject *)Py_NewRef(type));
        for (int j = 0; j < 3; j++) rec_i64.off[j] = slot_offset_i64(type, names[j]);
    }
    if (rec_i64.off[i]) {
        *out = *(const int64_t *)((const char *)obj + rec_i64.off[i]);
        return 0;
    }
    PyObject *v = slot_get(&rec_slots, obj, names, 3, i);
    if (!v) return -1;
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)x;
    return 0;
}

/* Where num is or would go in seen[0..n) (ascending). */
static inline Py_ssize_t
seen_at(const int64_t *seen, Py_ssize_t n, int64_t num)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (seen[mid] < num) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The lower bound on group ``num``'s seqs that the tie skip reads (``num`` in range):
 * int64's lowest (no skip) for int32's lowest, the mark knobs._FIRST_SEQ32 keeps for an
 * unknown group and for every seq at or below it, so above some of those. O(1). */
static inline int64_t
first_bound(const offer_t *o, int64_t num)
{
    if (!o->first32) return o->first[num];
    int32_t f = o->first32[num];
    return f == INT32_MIN ? INT64_MIN : (int64_t)f;
}

/* _Exact.offer for one group in C (unweighted): its visible (born <= version < died),
 * accepted records, by seq, enter the heap while they beat its worst (a higher score,
 * then a lower seq, wins; the records are by seq, so once one loses the rest do). A
 * group the seeding offered is not offered again; a purged one (None) has no records.
 * Returns -1 with an exception set (accept raised, a record of the wrong shape).
 * O(records of the group log limit), plus accept's calls. */
static int
offer_group(offer_t *o, int64_t num, double score)
{
    Py_ssize_t n_seen = (Py_ssize_t)o->hn[1], at = seen_at(o->seen, n_seen, num);
    if (at < n_seen && o->seen[at] == num) return 0;
    if (o->remember) {
        if (n_seen >= o->seen_cap) {
            PyErr_SetString(PyExc_ValueError, "seen is full");
            return -1;
        }
        memmove(o->seen + at + 1, o->seen + at, (size_t)(n_seen - at) * sizeof(int64_t));
        o->seen[at] = num;
        o->hn[1] = n_seen + 1;
    }
    if (o->hn[0] == o->limit && score < o->hs[0]) return 0;
    /* A tie with the worst: only a record of a lower seq enters, and none of the group's
     * is below its first seq (one read here instead of a chain of misses: the table's
     * slot, the group, its records, each record and its seq). On this data nearly every
     * group offered is such a tie, a copy of a text already in the heap. */
    if ((o->first || o->first32) && o->hn[0] == o->limit && score == o->hs[0] && num >= 0 &&
        num < o->nfirst && o->hq[0] > INT64_MIN &&
        first_bound(o, num) >= -o->hq[0]) {
        return 0;
    }
    if (num < 0 || num >= PyList_GET_SIZE(o->table)) {
        PyErr_SetString(PyExc_ValueError, "group number beyond the table");
        return -1;
    }
    PyObject *group = PyList_GET_ITEM(o->table, num);
    if (group == Py_None) return 0; /* purged: no record to score */
    /* With columns (knobs._GROUP_COLUMNS) the slot holds the records themselves. */
    PyObject *recs = o->columns ? Py_NewRef(group) : slot_get(&group_slots, group, &s_recs, 1, 0);
    if (!recs) return -1;
    /* A list of records, or the group's one record itself (knobs._SINGLE_RECORD). */
    int single = !PyList_Check(recs);
    int rc = 0;
    for (Py_ssize_t i = 0; i < (single ? 1 : PyList_GET_SIZE(recs)); i++) {
        PyObject *rec = Py_NewRef(single ? recs : PyList_GET_ITEM(recs, i));
        int64_t seq, born, died;
        if (attr_i64(rec, 0, &seq) < 0) {
            rc = -1;
        } else if (o->hn[0] == o->limit &&
                   (score < o->hs[0] || (score == o->hs[0] && -seq <= o->hq[0]))) {
            Py_DECREF(rec);
            break;
        } else if (attr_i64(rec, 1, &born) < 0 || attr_i64(rec, 2, &died) < 0) {
            rc = -1;
        } else if (born <= o->version && o->version < died) {
            int ok = 1;
            if (o->accept != Py_None) {
                PyObject *r = PyObject_CallOneArg(o->accept, rec);
                ok = r ? PyObject_IsTrue(r) : -1;
                Py_XDECREF(r);
            }
            if (ok < 0) rc = -1;
            else if (ok) heap_put(o, score, -seq, rec);
        }
        Py_DECREF(rec);
        if (rc < 0) break;
    }
    Py_DECREF(recs);
    return rc;
}

typedef struct {
    double score;
    int64_t num;
} found_t;

/* Whether a comes before b best first: a higher score, then a lower group number. */
static inline int
found_before(const found_t *a, const found_t *b)
{
    return a->score > b->score || (a->score == b->score && a->num < b->num);
}

/* Sift f[i] down the best-first heap f[0..n). */
static void
found_sift(found_t *f, Py_ssize_t n, Py_ssize_t i)
{
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && found_before(&f[l], &f[m])) m = l;
        if (r < n && found_before(&f[r], &f[m])) m = r;
        if (m == i) return;
        found_t t = f[i];
        f[i] = f[m];
        f[m] = t;
        i = m;
    }
}

/* Offer the n groups found (nums, scores) best first, stopping at the first whose
 * score is below the heap's worst once it is full (the records of those after it
 * cannot enter): in number order most of them would enter and be pushed out again, each
 * after reading its records (cache misses). Best first through a heap of the groups
 * (O(n) to build, O(log n) per group taken), not a sort: early in a long query a window
 * finds hundreds of groups of which a few enter. Returns -1 with an exception set.
 * O(n + offers log n). */
static int
offer_found(offer_t *o, const int64_t *nums, const double *scores, Py_ssize_t n)
{
    if (n == 0) return 0;
    found_t *f = PyMem_Malloc((size_t)n * sizeof(found_t));
    if (!f) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t m = 0;
    double worst = o->hn[0] == o->limit ? o->hs[0] : -INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (scores[i] < worst) continue; /* cannot enter: the worst only rises */
        f[m].score = scores[i];
        f[m].num = nums[i];
        m++;
    }
    if (o->ahead) {
        /* Each group's first seq (the tie check's read) and its slot in the table, asked
         * for at once: read one group after another, best first, each was a miss (the
         * first seqs' 8 MB and the table's at a million groups) the next waited behind. */
        PyObject **items = ((PyListObject *)o->table)->ob_item;
        Py_ssize_t ntable = PyList_GET_SIZE(o->table);
        for (Py_ssize_t i = 0; i < m; i++) {
            int64_t num = f[i].num;
            if (o->first && num >= 0 && num < o->nfirst) __builtin_prefetch(&o->first[num]);
            if (o->first32 && num >= 0 && num < o->nfirst) __builtin_prefetch(&o->first32[num]);
            if (num >= 0 && num < ntable) __builtin_prefetch(&items[num]);
        }
    }
    for (Py_ssize_t i = m / 2 - 1; i >= 0; i--) found_sift(f, m, i);
    int rc = 0;
    while (m > 0 && rc == 0) {
        if (o->hn[0] == o->limit && f[0].score < o->hs[0]) break;
        rc = offer_group(o, f[0].num, f[0].score);
        f[0] = f[--m];
        found_sift(f, m, 0);
    }
    PyMem_Free(f);
    return rc;
}

/* With `prefetch`, the windowed walk asks for the length of the group this many
 * postings ahead of the one it adds. */
#define PREFETCH_AHEAD 16

/* The most groups a window of the windowed driver may span (its width is the call's
 * room, at most this: 4,096 groups, a 32 KiB score array and a 512 B bitset, for the
 * steps of a sliced query; 16,384 for a drained one on an AMD CPU, knobs._DRAIN_WINDOW).
 * A call's scratch is made for its room, not for this. */
#define WINDOW 65536

/* The head of the walk loops' body: the posting's group num and its offset at in the
 * window; past the window's end, the loop ends (break), and a group below lo or beyond
 * the lengths (an offset at or past lim that is not past hi) returns -1. */
#define WALK_AT                                                                            \
    int64_t num = g[c];                                                                    \
    uint64_t at = (uint64_t)(num - lo);                                                    \
    if (at >= lim) { /* beyond the window, or out of range */                              \
        if (num >= hi) break;                                                              \
        return -1;                                                                         \
    }

/* The tight walk of one essential list over a window of groups [lo, hi), hi = lo +
 * width (flags & 4, knobs._TIGHT_WALK): the same operations on the same values as the
 * loop of window_steps, in a form the compiler keeps in registers. The build's
 * -fno-strict-aliasing makes it reload every field of the term after each store to the
 * score array in that loop; here they are locals, with one loop per width of the
 * frequencies and per prefetch flag, one unsigned compare for both the window's end and
 * the range checks, and the marks set without a branch: a group's partial score only
 * grows, so setting its bit again at every posting past theta sets what the first such
 * posting set (the mispredicted branch cost more). Returns the position of the first
 * posting at or beyond hi (count if none), or -1 on a group number below lo (a list out
 * of order) or at or beyond the lengths. O(postings walked). */
#define WALK_LOOP(TF, PF)                                                                  \
    for (; c < count; c++) {                                                               \
        WALK_AT                                                                            \
        if (PF) { /* as window_steps' prefetch, without a branch */                        \
            uint32_t ahead = (uint32_t)g[c + PREFETCH_AHEAD < count ? c + PREFETCH_AHEAD : c]; \
            __builtin_prefetch(&ln[ahead < (uint64_t)nlen ? ahead : 0]);                   \
        }                                                                                  \
        double tf = (double)(TF)[c];                                                       \
        double after = acc[at] + wi * (tf / (tf + (a_part + b_part * (double)ln[num])));  \
        acc[at] = after;                                                                   \
        mark[at >> 6] |= (uint64_t)(after * up + rest >= theta) << (at & 63);              \
    }

/* WALK_LOOP with the lengths read as one-byte codes (length_codes): a[num]'s code from
 * codes (1 MB at a million groups, where the int32 lengths take 4 MB: the L2 holds it),
 * the saturation's denominator a_part + b_part * floor(code) from the call's table den
 * (BM25_CODES entries, in the L1). floor(code) <= the length, so each partial score is
 * one the exact lengths give or above it (IEEE operations are monotone): an upper bound
 * to mark with. Lengths below 128 have their own code, so there the same score bit for
 * bit. */
#define WALK_LOOP_CODES(TF, PF)                                                            \
    for (; c < count; c++) {                                                               \
        WALK_AT                                                                            \
        if (PF) {                                                                          \
            uint32_t ahead = (uint32_t)g[c + PREFETCH_AHEAD < count ? c + PREFETCH_AHEAD : c]; \
            __builtin_prefetch(&codes[ahead < (uint64_t)nlen ? ahead : 0]);                \
        }                                                                                  \
        double tf = (double)(TF)[c];                                                       \
        double after = acc[at] + wi * (tf / (tf + den[codes[num]]));                       \
        acc[at] = after;                                                                   \
        mark[at >> 6] |= (uint64_t)(after * up + rest >= theta) << (at & 63);              \
    }

/* WALK_LOOP_CODES without its prefetch, fewer instructions a posting (the scalar walk
 * on a CPU without AVX-512 is bound by its instruction count): with `one` (more & 256,
 * knobs._WALK_ONES), a posting of frequency 1 takes its part from the term's table
 * one[code] = wi * (1.0 / (1.0 + den[code])), made once a call: the walk's own
 * operations on the same values, so the same part bit for bit, without the conversion
 * and the division; and the mark compares the score with `cut` (mark_cut: the least
 * double whose `* up + rest` reaches theta, so the same marks) instead of computing
 * `after * up + rest` (more & 512, knobs._MARK_CUT; CUT 0: that expression, as before).
 * CUT 2 (more & 1024, knobs._SCAN_MARKS): no mark at all; window_steps finds the marks
 * from the window's scores after its walk (scan_marks). */
#define WALK_LOOP_ONES(TF, ONE, CUT)                                                       \
    for (; c < count; c++) {                                                               \
        WALK_AT                                                                            \
        unsigned code = codes[num];                                                        \
        double add;                                                                        \
        if ((ONE) && (TF)[c] == 1) {                                                       \
            add = one[code];                                                               \
        } else {                                                                           \
            double tf = (double)(TF)[c];                                                   \
            add = wi * (tf / (tf + den[code]));                                            \
        }                                                                                  \
        double after = acc[at] + add;                                                      \
        acc[at] = after;                                                                   \
        if ((CUT) == 1) mark[at >> 6] |= (uint64_t)(after >= cut) << (at & 63);            \
        else if ((CUT) == 0)                                                               \
            mark[at >> 6] |= (uint64_t)(after * up + rest >= theta) << (at & 63);          \
    }

/* The least double a with a * up + rest >= theta as the walk computes it (IEEE double,
 * no fused multiply-add: the build's -ffp-contract=off), found from (theta - rest) / up
 * by a few steps of one ulp: x * up + rest only grows with x (up > 0), so x >= a exactly
 * when x * up + rest >= theta, for every double x (NaN: neither). -INFINITY for theta
 * -INFINITY (every score but NaN marked, as the expression marks it). Returns 0 where it
 * cannot say (up not finite and > 0, rest not finite, theta +INFINITY or NaN, the guess
 * not finite, or more than 64 steps: the caller keeps the expression). */
static int
mark_cut(double up, double rest, double theta, double *cut)
{
    if (!(up > 0.0) || !isfinite(up) || !isfinite(rest)) return 0;
    if (theta == -INFINITY) {
        *cut = -INFINITY;
        return 1;
    }
    if (!isfinite(theta)) return 0;
    double a = (theta - rest) / up;
    if (!isfinite(a)) return 0;
    if (a * up + rest >= theta) {
        for (int n = 0; n < 64; n++) { /* down while still reaching theta */
            double d = nextafter(a, -INFINITY);
            if (!(d * up + rest >= theta)) {
                *cut = a;
                return 1;
            }
            a = d;
        }
        return 0;
    }
    for (int n = 0; n < 64; n++) { /* up until it reaches theta */
        a = nextafter(a, INFINITY);
        if (a * up + rest >= theta) {
            *cut = a;
            return 1;
        }
    }
    return 0;
}

/* WALK_LOOP_ONES's forms, out of line: inlined into window_steps, its loop kept
 * reloading its fields from the stack (too few registers left there). cut_ok: 0 the
 * mark's expression, 1 the cut, 2 no mark (scan_marks after the walk). Returns as
 * walk_tight. */
__attribute__((noinline)) static Py_ssize_t
walk_ones(const int32_t *g, const void *tfs, int narrow, Py_ssize_t c, Py_ssize_t count,
          int64_t lo, int64_t hi, uint64_t lim, const uint8_t *codes, const double *den,
          const double *one, double wi, double up, double rest, double theta, int cut_ok,
          double cut, double *acc, uint64_t *mark)
{
    const uint8_t *tf8 = (const uint8_t *)tfs;
    const int32_t *tf32 = (const int32_t *)tfs;
    if (narrow) {
        if (one && cut_ok == 2) WALK_LOOP_ONES(tf8, 1, 2)
        else if (cut_ok == 2) WALK_LOOP_ONES(tf8, 0, 2)
        else if (one && cut_ok) WALK_LOOP_ONES(tf8, 1, 1)
        else if (one) WALK_LOOP_ONES(tf8, 1, 0)
        else WALK_LOOP_ONES(tf8, 0, 1)
    } else {
        if (one && cut_ok == 2) WALK_LOOP_ONES(tf32, 1, 2)
        else if (cut_ok == 2) WALK_LOOP_ONES(tf32, 0, 2)
        else if (one && cut_ok) WALK_LOOP_ONES(tf32, 1, 1)
        else if (one) WALK_LOOP_ONES(tf32, 1, 0)
        else WALK_LOOP_ONES(tf32, 0, 1)
    }
    return c;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(ACTORMEM_NO_SIMD)
#include <immintrin.h>
#define HAVE_SIMD_WALK 1

/* Whether this CPU runs walk_simd (AVX-512 F and VL), found once. */
static int
simd_walk_usable(void)
{
    static int usable = -1;
    if (usable < 0) {
        __builtin_cpu_init();
        usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    }
    return usable;
}

/* The tight walk eight postings at a time (flags & 16, knobs._SIMD_WALK), while all eight
 * of the next ones fall in the window and in range (else, and for the last few of the
 * list, walk_tight's scalar loop goes on from the position returned): the same IEEE
 * operations on the same values, lane by lane (built with -ffp-contract=off: no fused
 * multiply-add), so the same partial scores bit for bit. Eight groups that ascend
 * (checked: else the scalar loop takes them) have distinct score slots, so the gather,
 * add and scatter of the scores equal eight loads, adds and stores. The lengths are gathered (with `prefetch`, those
 * PREFETCH_AHEAD postings on asked for first, as in the scalar loop); the marks set from
 * the comparison's mask, lane by lane. Every
 * lane's offset is checked below lim before any gather or scatter: an offset below
 * lim is a group at or above lo, below hi and below nlen. */
__attribute__((target("avx2,avx512f,avx512vl"))) static Py_ssize_t
walk_simd(const int32_t *g, const void *tfs, int wide, Py_ssize_t c, Py_ssize_t count,
          int64_t lo, uint64_t lim, const int32_t *ln, Py_ssize_t nlen, int prefetch,
          double wi, double a_part, double b_part, double up, double rest, double theta,
          double *acc, uint64_t *mark, const uint8_t *codes, const double *dtab)
{
    if (lim == 0 || lo > INT32_MAX) return c;
    const __m256i vlo = _mm256_set1_epi32((int32_t)lo), vlim = _mm256_set1_epi32((int32_t)lim);
    const __m256i zero = _mm256_setzero_si256();
    const __m512d va = _mm512_set1_pd(a_part), vb = _mm512_set1_pd(b_part);
    const __m512d vwi = _mm512_set1_pd(wi), vup = _mm512_set1_pd(up);
    const __m512d vrest = _mm512_set1_pd(rest), vtheta = _mm512_set1_pd(theta);
    const __m256i three = _mm256_set1_epi32(3), byte = _mm256_set1_epi32(0xFF);
    for (; c + 8 <= count; c += 8) {
        __m256i vg = _mm256_loadu_si256((const __m256i *)(g + c));
        __m256i vat = _mm256_sub_epi32(vg, vlo);
        /* g >= 0 (so g - lo does not wrap) and g - lo below lim, unsigned; and each
         * lane's group above the one before (lane 0 against lane 7, ignored): eight
         * distinct score slots, else (a list with a group twice, which the scalar loop
         * adds twice) the scatter would lose an add, and the scalar loop takes them. */
        __mmask8 ok = _mm256_cmpge_epi32_mask(vg, zero) & _mm256_cmplt_epu32_mask(vat, vlim) &
                      (_mm256_cmpgt_epi32_mask(vg, _mm256_alignr_epi32(vg, vg, 7)) | 1);
        if (ok != 0xFF) break;
        if (prefetch && c + PREFETCH_AHEAD + 8 <= count) { /* as the scalar loop's */
            for (int k = 0; k < 8; k++) {
                uint32_t ahead = (uint32_t)g[c + PREFETCH_AHEAD + k];
                if (codes) __builtin_prefetch(&codes[ahead < (uint64_t)nlen ? ahead : 0]);
                else __builtin_prefetch(&ln[ahead < (uint64_t)nlen ? ahead : 0]);
            }
        }
        __m256i vtfi = wide ? _mm256_loadu_si256((const __m256i *)((const int32_t *)tfs + c))
                            : _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                  (const __m128i *)((const uint8_t *)tfs + c)));
        __m512d tf = _mm512_cvtepi32_pd(vtfi);
        __m512d part;
        if (codes) {
            /* The code of each group: the aligned four bytes holding it (inside codes:
             * its length is a multiple of four, checked by the caller, and every group
             * is below it), shifted down to its byte; then the table's denominator. */
            __m256i word = _mm256_i32gather_epi32((const int *)codes, _mm256_srli_epi32(vg, 2), 4);
            __m256i code = _mm256_and_si256(
                _mm256_srlv_epi32(word, _mm256_slli_epi32(_mm256_and_si256(vg, three), 3)), byte);
            part = _mm512_i32gather_pd(code, dtab, 8);
        } else {
            __m512d dl = _mm512_cvtepi32_pd(_mm256_i32gather_epi32(ln, vg, 4));
            part = _mm512_add_pd(va, _mm512_mul_pd(vb, dl));
        }
        /* tf / (tf + (a_part + b_part * dl)), times wi, added to the score */
        __m512d den = _mm512_add_pd(tf, part);
        __m512d add = _mm512_mul_pd(vwi, _mm512_div_pd(tf, den));
        __m512d after = _mm512_add_pd(_mm512_i32gather_pd(vat, acc, 8), add);
        _mm512_i32scatter_pd(acc, vat, after, 8);
        __mmask8 hit = _mm512_cmp_pd_mask(_mm512_add_pd(_mm512_mul_pd(after, vup), vrest),
                                          vtheta, _CMP_GE_OQ);
        if (hit) {
            int32_t ats[8];
            _mm256_storeu_si256((__m256i *)ats, vat);
            for (unsigned bits = hit; bits; bits &= bits - 1) {
                uint32_t at = (uint32_t)ats[__builtin_ctz(bits)];
                mark[at >> 6] |= (uint64_t)1 << (at & 63);
            }
        }
    }
    return c;
}
#endif

static Py_ssize_t
walk_tight(const term_t *t, Py_ssize_t c, int64_t lo, int64_t hi, const int32_t *ln,
           Py_ssize_t nlen, double a_part, double b_part, double up, double rest,
           double theta, double *acc, uint64_t *mark, int prefetch, int simd,
           const uint8_t *codes, const double *den, int codes_simd, const double *one,
           int cut_on, int nomark)
{
    if (lo < 0 || hi < lo || hi - lo > WINDOW) return -1;
    if (nomark) {
        /* scan_marks (window_steps checked the codes and the window's cut): the scalar
         * loop without marks and without a prefetch, never the eight-lane one (which
         * marks; on this project's AMD EPYC with AVX-512 the scalar loop without marks
         * walked a synthetic step in 10-20% less time than it). */
        if (!codes) return -1;
        const uint64_t lim = lo >= nlen ? 0 : (uint64_t)(hi < nlen ? hi - lo : nlen - lo);
        return walk_ones(t->g, t->tfs.buf, t->tfs.itemsize == 1, c, t->count, lo, hi, lim,
                         codes, den, one, t->wi, up, rest, theta, 2, 0.0, acc, mark);
    }
    const int32_t *g = t->g;
    const Py_ssize_t count = t->count;
    const double wi = t->wi;
    /* An offset below lim is a group below hi and below nlen. */
    const uint64_t lim = lo >= nlen ? 0 : (uint64_t)(hi < nlen ? hi - lo : nlen - lo);
    const uint8_t *tf8 = (const uint8_t *)t->tfs.buf;
    const int32_t *tf32 = (const int32_t *)t->tfs.buf;
#ifdef HAVE_SIMD_WALK
    if (simd && simd_walk_usable() && (!codes || codes_simd)) {
        c = walk_simd(g, t->tfs.buf, t->tfs.itemsize != 1, c, count, lo, lim, ln, nlen,
                      prefetch, wi, a_part, b_part, up, rest, theta, acc, mark, codes, den);
    }
#else
    (void)simd;
    (void)codes_simd;
#endif
    double cut = 0.0;
    const int cut_ok = codes && !prefetch && cut_on && mark_cut(up, rest, theta, &cut);
    if (codes && !prefetch && (one || cut_ok)) {
        return walk_ones(g, t->tfs.buf, t->tfs.itemsize == 1, c, count, lo, hi, lim, codes,
                         den, one, wi, up, rest, theta, cut_ok, cut, acc, mark);
    }
    if (codes) {
        if (t->tfs.itemsize == 1) {
            if (prefetch) WALK_LOOP_CODES(tf8, 1) else WALK_LOOP_CODES(tf8, 0)
        } else {
            if (prefetch) WALK_LOOP_CODES(tf32, 1) else WALK_LOOP_CODES(tf32, 0)
        }
        return c;
    }
    if (t->tfs.itemsize == 1) {
        if (prefetch) WALK_LOOP(tf8, 1) else WALK_LOOP(tf8, 0)
    } else {
        if (prefetch) WALK_LOOP(tf32, 1) else WALK_LOOP(tf32, 0)
    }
    return c;
}
#undef WALK_AT
#undef WALK_LOOP
#undef WALK_LOOP_CODES
#undef WALK_LOOP_ONES

/* scan_marks (more & 1024, knobs._SCAN_MARKS): the marks of a window whose walk set none,
 * found from its scores: a group's bit set where its partial score is >= cut (> 0), the
 * least score that reaches theta with the non-essential bounds (mark_cut). The walk's
 * marks are each posting's `after >= cut` ORed: a walked group whose final score is >= cut
 * had it at its last posting, so every group this marks, the walk marked; one the walk
 * marked and this does not has a final score below cut, for which the lookups' first
 * check (`partial * up + prefix[ne] < theta`, the cut's own expression) gives up before
 * any work: the same groups found, the same work counted. A slot no posting wrote holds
 * 0.0 < cut: not marked. */

/* Whether scan_window may use AVX (found once). */
static int
scan_avx_usable(void)
{
#if defined(__GNUC__) && defined(__x86_64__) && !defined(ACTORMEM_NO_SIMD)
    static int usable = -1;
    if (usable < 0) {
        __builtin_cpu_init();
        usable = __builtin_cpu_supports("avx") != 0;
    }
    return usable;
#else
    return 0;
#endif
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(ACTORMEM_NO_SIMD)
#include <immintrin.h>
/* scan_window's 64-slot words with AVX: sixteen compares of four scores ORed, the bits
 * made only for a word with a score at or above cut (few are). Returns the slots done (a
 * multiple of 64). */
__attribute__((target("avx"))) static Py_ssize_t
scan_words_avx(const double *acc, Py_ssize_t n, double cut, uint64_t *mark)
{
    const __m256d vcut = _mm256_set1_pd(cut);
    Py_ssize_t w = 0;
    for (; 64 * (w + 1) <= n; w++) {
        const double *a = acc + 64 * w;
        __m256d any = _mm256_setzero_pd();
        for (int k = 0; k < 64; k += 4) {
            any = _mm256_or_pd(any, _mm256_cmp_pd(_mm256_loadu_pd(a + k), vcut, _CMP_GE_OQ));
        }
        if (!_mm256_movemask_pd(any)) continue;
        uint64_t bits = 0;
        for (int k = 0; k < 64; k += 4) {
            unsigned m = (unsigned)_mm256_movemask_pd(
                _mm256_cmp_pd(_mm256_loadu_pd(a + k), vcut, _CMP_GE_OQ));
            bits |= (uint64_t)m << k;
        }
        mark[w] |= bits;
    }
    return 64 * w;
}
#endif

/* The marks of acc[0..n) (n <= WINDOW): bit i set where acc[i] >= cut (NaN: not). O(n). */
static void
scan_window(const double *acc, Py_ssize_t n, double cut, uint64_t *mark)
{
    Py_ssize_t i = 0;
#if defined(__GNUC__) && defined(__x86_64__) && !defined(ACTORMEM_NO_SIMD)
    if (scan_avx_usable()) i = scan_words_avx(acc, n, cut, mark);
#endif
    for (; i < n; i++) mark[i >> 6] |= (uint64_t)(acc[i] >= cut) << (i & 63);
}

/* Postings walked by the windowed driver since the module was loaded (under the GIL):
 * for measurements (bm25_walked). */
static long long walked_total;

PyDoc_STRVAR(bm25_walked_doc,
"bm25_walked() -> int: the postings the windowed walk has read since the module was\n"
"loaded (every essential posting of every window, summed; for measurements). O(1).");

static PyObject *
bm25_walked(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong(walked_total);
}

/* With `ahead` (flags & 32 and 8, knobs._PREFETCH_LOOKUPS), the lookups of the group
 * this many marked groups on are asked for before those of the current one. */
#define LOOK_AHEAD 2

/* Whether window_steps' modes (see daat_tight) take the tight walk. */
#define WALKS_TIGHT(tight) (((tight) & 1) != 0)

/* Ask for the posting (and its frequency) at which seek's interpolated guess for group
 * num will land, in each non-essential list: the guess made from the cursor now, which
 * the lookups in between move only a little (the lists' groups are spread about evenly),
 * and only where seek would guess. Reads the cursor's group and the list's last (both
 * cached); addresses inside the lists only. */
static inline void
prefetch_guess(const term_t *t, int64_t num)
{
    Py_ssize_t cur = t->cur, count = t->count;
    if (t->bits && num >= 0 && num < t->upto) { /* the dense array's byte, not the list */
        __builtin_prefetch(&t->bits[num >> 2]);
        return;
    }
    if (t->bits && t->dpos > cur) cur = t->dpos;
    if (count - cur <= INTERP_MIN) return;
    int64_t first = t->g[cur], last = t->g[count - 1];
    if (!(first < num && num <= last)) return;
    Py_ssize_t span = count - 1 - cur;
    Py_ssize_t pos = cur + (Py_ssize_t)((double)(num - first) / (double)(last - first) *
                                        (double)span);
    if (pos <= cur) pos = cur + 1;
    if (pos > count - 1) pos = count - 1;
    __builtin_prefetch(&t->g[pos]);
    __builtin_prefetch((const char *)t->tfs.buf + pos * t->tfs.itemsize);
}

static inline void
prefetch_lookups(const term_t *T, const Py_ssize_t *ord, Py_ssize_t ne, int64_t num)
{
    for (Py_ssize_t j = ne - 1; j >= 0; j--) prefetch_guess(&T[ord[j]], num);
}

/* The windowed driver (with `sticky`): MaxScore over windows of up to WINDOW groups (no
 * more than the room left in the output, so that a window's groups always fit). In a
 * window, the essential terms' postings are added term at a time into a score array by
 * group (and a bitset of the groups met): O(postings) with no per-group scan of the
 * terms, which document at a time costs on long queries with many essential (cheap)
 * lists. Then each group met, ascending: the non-essential terms looked up, largest bound
 * first, while its partial score with the bounds of the terms left can reach theta; a
 * group that reaches it gets its exact score, term by term in the query's order (its
 * frequencies found again from the window's start: these are few). The partial scores
 * are summed in another order than the exact one: only ever compared with the bounds'
 * slack. Windows are whole: a call ends between two, after budget postings of work or
 * when the next could overflow the output. Returns -1 with an exception set. */
/* window_steps' scratch, made once a bm25_daat call and kept between its steps (more &
 * 8192) rather than made and freed by each step: acc and mark zeroed when made, and
 * zero again after every window a step completes (its clear); ones and keep written
 * before they are read, but for ones' last BM25_CODES doubles, the saturation at a
 * frequency of 1 by code, the same for every step of a call (den fixed): made once. */
typedef struct {
    double *acc, *keep, *ones;
    Py_ssize_t cap; /* the groups acc, keep, mark and marked hold */
    int sat1_made; /* ones' last BM25_CODES doubles: made */
    uint64_t *mark;
    uint16_t *marked;
    Py_ssize_t *starts;
} wbufs_t;

static void
wbufs_free(wbufs_t *wb)
{
    PyMem_Free(wb->acc);
    PyMem_Free(wb->keep);
    PyMem_Free(wb->ones);
    PyMem_Free(wb->mark);
    PyMem_Free(wb->marked);
    PyMem_Free(wb->starts);
    memset(wb, 0, sizeof(*wb));
}

static int
window_steps(term_t *T, Py_ssize_t q, const Py_ssize_t *ord, Py_ssize_t ne,
             const double *prefix, const int32_t *ln, Py_ssize_t nlen, double a_part,
             double b_part, double k1, double b, double avgdl, double up, double theta,
             Py_ssize_t budget, Py_ssize_t room, int64_t *out_n, double *out_s,
             Py_ssize_t *p_emitted, int *p_finished, offer_t *o, int prefetch, int tight,
             const uint8_t *codes, const double *den, int codes_simd, int lookup_codes,
             int sparse_clear, int walk_ones, int cut_on, int scan_on, int sparse_marks,
             wbufs_t *wb)
{
    const int ahead = (tight & 4) && seek_interp;
    /* The lookups take their denominators from the codes (lookup_codes, with the codes'
     * walk) only where every non-essential term's part is then an upper bound: wi >= 0
     * (the split is made once a call, so ne and the terms are fixed here). */
    int lcodes = lookup_codes && codes && WALKS_TIGHT(tight);
    for (Py_ssize_t j = 0; j < ne && lcodes; j++) {
        if (!(T[ord[j]].wi >= 0.0)) lcodes = 0;
    }
    /* walk_ones: each essential term's part at a frequency of 1 by code (see
     * WALK_LOOP_ONES), made once a call (the split is fixed in it), for the terms the
     * codes' scalar walk takes (wi >= 0). */
    double *ones = NULL;
    if (walk_ones && codes && WALKS_TIGHT(tight)) {
        if (wb && !wb->ones) {
            wb->ones = PyMem_Malloc((size_t)(q + 1) * BM25_CODES * sizeof(double));
            if (!wb->ones) {
                PyErr_NoMemory();
                return -1;
            }
        }
        ones = wb ? wb->ones : PyMem_Malloc((size_t)(q + 1) * BM25_CODES * sizeof(double));
        if (!ones) {
            PyErr_NoMemory();
            return -1;
        }
        /* The saturation at a frequency of 1 by code is the same for every term: 256
         * divisions a call, not 256 a walked term (~7 a call at 1M), then a multiply
         * each: the loop's `wi * (tf / (tf + den))` at tf 1.0 on the same values, the
         * same bits (with wb, made once a bm25_daat call: den is fixed in it). */
        double *sat1 = ones + q * BM25_CODES;
        if (!wb || !wb->sat1_made) {
            for (int k = 0; k < BM25_CODES; k++) sat1[k] = 1.0 / (1.0 + den[k]);
            if (wb) wb->sat1_made = 1;
        }
        for (Py_ssize_t i = ne; i < q; i++) {
            const double wi = T[ord[i]].wi;
            double *one = ones + ord[i] * BM25_CODES;
            for (int k = 0; k < BM25_CODES; k++) one[k] = wi * sat1[k];
        }
    }
    /* scan_on (more & 1024): the walk sets no marks, scan_marks finds them after it, in
     * a window whose cut mark_cut finds (> 0), where the walk runs over the codes (its
     * scalar loop then, whatever the CPU and the prefetch flag), the cut asked for, and
     * every essential term has a finite wi >= 0 (the codes' walk; the split is fixed in
     * a call). */
    int scan_ok = scan_on && cut_on && codes && WALKS_TIGHT(tight);
    for (Py_ssize_t i = ne; i < q && scan_ok; i++) {
        if (!(T[ord[i]].wi >= 0.0 && isfinite(T[ord[i]].wi))) scan_ok = 0;
    }
    /* The scratch's groups: the widest window this call may walk (its room, at most
     * WINDOW), in whole 64-group words. */
    const Py_ssize_t wsz = room >= WINDOW ? WINDOW : room <= 64 ? 64 : (room + 63) & ~(Py_ssize_t)63;
    if (wb && wb->acc && wb->cap < wsz) { /* made for a narrower room: made again */
        PyMem_Free(wb->acc);
        PyMem_Free(wb->keep);
        PyMem_Free(wb->mark);
        PyMem_Free(wb->marked);
        wb->acc = wb->keep = NULL;
        wb->mark = NULL;
        wb->marked = NULL;
        PyMem_Free(wb->starts);
        wb->starts = NULL;
    }
    if (wb && !wb->acc) {
        wb->cap = wsz;
        wb->acc = PyMem_Calloc(wsz, sizeof(double));
        wb->keep = PyMem_Malloc(wsz * sizeof(double));
        wb->mark = PyMem_Calloc(wsz / 64, sizeof(uint64_t));
        wb->marked = PyMem_Malloc(wsz * sizeof(uint16_t));
        wb->starts = PyMem_Malloc((q > 0 ? q : 1) * sizeof(Py_ssize_t));
        if (!wb->acc || !wb->keep || !wb->mark || !wb->marked || !wb->starts) {
            PyErr_NoMemory();
            return -1; /* the caller frees wb */
        }
    }
    double *acc = wb ? wb->acc : PyMem_Calloc(wsz, sizeof(double));
    /* scan_on: a sparse window's marked scores, kept as its pass clears acc. */
    double *keep = wb ? wb->keep : scan_ok ? PyMem_Malloc(wsz * sizeof(double)) : NULL;
    uint64_t *mark = wb ? wb->mark : PyMem_Calloc(wsz / 64, sizeof(uint64_t));
    /* a window's marks, in order */
    uint16_t *marked = wb ? wb->marked : PyMem_Malloc(wsz * sizeof(uint16_t));
    /* With sparse_clear, each essential term's first position in the window. */
    Py_ssize_t *starts = wb ? wb->starts : PyMem_Malloc((q > 0 ? q : 1) * sizeof(Py_ssize_t));
    if (!acc || !mark || !marked || !starts || (scan_ok && !keep)) {
        if (!wb) {
            PyMem_Free(acc);
            PyMem_Free(keep);
            PyMem_Free(mark);
            PyMem_Free(marked);
            PyMem_Free(starts);
            PyMem_Free(ones);
        }
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t emitted = *p_emitted, work = 0, found = 0;
    int rc = 0;
    /* With offers, a call also ends once it found `room` groups, as it does without
     * (its output full): the next call splits the terms again at the theta reached. */
    while (work < budget && room - emitted > 0 && found < room) {
        int64_t lo = INT64_MAX;
        Py_ssize_t left = 0; /* the essential lists' postings not yet walked */
        for (Py_ssize_t i = ne; i < q; i++) {
            term_t *t = &T[ord[i]];
            if (t->cur < t->count && t->g[t->cur] < lo) lo = t->g[t->cur];
            left += t->count - t->cur;
        }
        if (lo == INT64_MAX) {
            *p_finished = 1;
            break;
        }
        Py_ssize_t width = room - emitted < wsz ? room - emitted : wsz;
        int64_t hi = lo + width;
        Py_ssize_t top = 0; /* acc[0..top) to clear after the window */
        Py_ssize_t walked = 0; /* the window's postings */
        const double rest = prefix[ne];
        double cut = 0.0;
        /* sparse_marks (more & 16384, knobs._SPARSE_MARKS): a window expected sparse, its
         * essential lists' postings left fewer than a quarter of the groups from lo on
         * (as if spread evenly), is walked marking by the cut, not scanned after: the
         * same marks either way (see scan_marks), a choice of speed only. */
        const int marks_here = sparse_marks && lo < nlen && 4 * left < nlen - lo;
        const int scan = scan_ok && !marks_here && mark_cut(up, rest, theta, &cut) && cut > 0.0;
        for (Py_ssize_t i = ne; i < q; i++) {
            term_t *t = &T[ord[i]];
            Py_ssize_t c = t->cur;
            t->xcur = c;
            starts[i] = c;
            const double wi = t->wi;
            if (WALKS_TIGHT(tight)) {
                /* The codes' partial scores are upper bounds only for wi >= 0. */
                Py_ssize_t end = walk_tight(t, c, lo, hi, ln, nlen, a_part, b_part, up, rest,
                                            theta, acc, mark, prefetch, tight & 2,
                                            wi >= 0.0 ? codes : NULL, den, codes_simd,
                                            ones ? ones + ord[i] * BM25_CODES : NULL,
                                            cut_on, scan);
                if (end < 0) {
                    PyErr_SetString(PyExc_ValueError,
                                    "group number beyond lengths, or a list out of order");
                    rc = -1;
                    goto done;
                }
                if (end > c) top = width; /* cleared whole: nothing assumes the order */
                c = end; /* the loop below then walks nothing */
            }
            while (c < t->count && t->g[c] < hi) {
                int64_t num = t->g[c];
                /* Below lo: a list out of order, whose offset num - lo would index
                 * before the score array. */
                if (num < 0 || num < lo || num >= nlen) {
                    PyErr_SetString(PyExc_ValueError,
                                    "group number beyond lengths, or a list out of order");
                    rc = -1;
                    goto done;
                }
                if (prefetch && c + PREFETCH_AHEAD < t->count) {
                    /* The length of the group PREFETCH_AHEAD postings on, asked for
                     * now: the list is read in order, the lengths are not. */
                    int32_t ahead = t->g[c + PREFETCH_AHEAD];
                    if (ahead >= 0 && ahead < nlen) __builtin_prefetch(&ln[ahead]);
                }
                double tf = tf_of(t, c);
                Py_ssize_t at = (Py_ssize_t)(num - lo);
                double before = acc[at];
                double after = before + wi * (tf / (tf + (a_part + b_part * (double)ln[num])));
                acc[at] = after;
                /* Marked once its partial score with every non-essential bound can
                 * reach theta (partial scores only grow, from 0 at a group's first
                 * posting): the others cannot. */
                if (after * up + rest >= theta && (before == 0.0 || before * up + rest < theta)) {
                    mark[at >> 6] |= (uint64_t)1 << (at & 63);
                }
                if (at >= top) top = at + 1;
                c++;
            }
            work += c - t->cur + 1;
            walked += c - t->cur;
            t->cur = c;
        }
        for (Py_ssize_t i = 0; i < ne; i++) T[ord[i]].xcur = -1; /* looked up: at cur */
        walked_total += walked;
        /* sparse_clear: 1, below an eighth of the window's slots; 2 (more & 32,
         * knobs._SPARSE_QUARTER), below a quarter: a slot cleared by its posting cost
         * ~0.35 ns, a whole 32 KiB window's memset ~350 ns (AMD EPYC, 1M groups). */
        const int sparse = sparse_clear && (8 >> (sparse_clear - 1)) * walked < top;
        const double *parts = acc; /* the marked groups' partial scores */
        if (scan && sparse) {
            /* scan_marks over the postings' slots, each cleared as it is read (a group
             * met again reads 0.0 < cut): the sparse clear's pass, with the marked
             * groups' scores kept aside for their lookups. */
            for (Py_ssize_t i = ne; i < q; i++) {
                const term_t *t = &T[ord[i]];
                for (Py_ssize_t c = starts[i]; c < t->cur; c++) {
                    const Py_ssize_t at = t->g[c] - lo;
                    const double v = acc[at];
                    acc[at] = 0.0;
                    if (v >= cut) {
                        keep[at] = v;
                        mark[at >> 6] |= (uint64_t)1 << (at & 63);
                    }
                }
            }
            parts = keep;
        } else if (scan) {
            scan_window(acc, top, cut, mark);
        }
        Py_ssize_t nmarked = 0;
        for (Py_ssize_t w = 0; w < (width + 63) / 64; w++) { /* no mark beyond width */
            uint64_t bits = mark[w];
            mark[w] = 0;
            while (bits) {
                marked[nmarked++] = (uint16_t)(64 * w + __builtin_ctzll(bits));
                bits &= bits - 1;
            }
        }
        {
            for (Py_ssize_t k = 0; k < nmarked; k++) {
                if (ahead && k + LOOK_AHEAD < nmarked) {
                    prefetch_lookups(T, ord, ne, lo + marked[k + LOOK_AHEAD]);
                }
                Py_ssize_t at = marked[k];
                int64_t num = lo + at;
                double partial = parts[at];
                /* With lookup_codes, the lookups' denominator from the group's length
                 * code (its byte was read by the walk: cached), the exact length only
                 * for a group that may still reach theta; else from the length, whose
                 * read missed the caches for nearly every marked group (the lengths'
                 * 4 MB at a million groups, which the walk over the codes never read). */
                double denom = lcodes ? den[codes[num]] : a_part + b_part * (double)ln[num];
                partial = look_up(T, ord, ne, prefix, num, partial, denom, up, theta, &work);
                if (!(partial * up >= theta)) continue;
                double dl = (double)ln[num];
                /* The exact score, in the query's order. */
                double norm = k1 * ((1.0 - b) + b * dl / avgdl), score = 0.0;
                for (Py_ssize_t i = 0; i < q; i++) {
                    term_t *t = &T[i];
                    Py_ssize_t c = t->cur;
                    if (t->xcur >= 0) {
                        c = t->xcur = seek(t->g, t->xcur, t->count, num);
                    } else if (t->bits) {
                        /* Looked up (all the non-essential terms were, for this group to
                         * get here): its frequency is in `at`, the cursor perhaps not at
                         * num (a dense array answered). */
                        double tf = t->at;
                        if (tf > 0.0) score += t->wi * (tf / (tf + norm));
                        continue;
                    }
                    if (c < t->count && t->g[c] == num) {
                        double tf = tf_of(t, c);
                        score += t->wi * (tf / (tf + norm));
                    }
                }
                work += q;
                out_n[emitted] = num;
                out_s[emitted] = score;
                emitted++;
            }
        }
        if (sparse && scan) {
            /* cleared by scan_marks' pass */
        } else if (sparse) {
            /* Few postings in a wide window: only their slots were written (each posting
             * walked in [starts[i], cur) is a group in [lo, hi), checked by the walk),
             * so those are cleared, not the window's whole score array. */
            for (Py_ssize_t i = ne; i < q; i++) {
                const term_t *t = &T[ord[i]];
                for (Py_ssize_t c = starts[i]; c < t->cur; c++) acc[t->g[c] - lo] = 0.0;
            }
        } else {
            memset(acc, 0, (size_t)top * sizeof(double));
        }
        if (o) { /* offered after each window: theta rises for the next one */
            if (offer_found(o, out_n, out_s, emitted) < 0) {
                rc = -1;
                goto done;
            }
            found += emitted;
            emitted = 0;
            double t = heap_theta(o);
            if (t > theta) theta = t;
        }
    }
done:
    if (!wb) {
        PyMem_Free(ones);
        PyMem_Free(keep);
        PyMem_Free(acc);
        PyMem_Free(mark);
        PyMem_Free(marked);
        PyMem_Free(starts);
    }
    *p_emitted = emitted;
    return rc;
}

/* The windowed walk's modes from bm25_daat's flags: bit 0, the tight walk; bit 1, its
 * eight-lane form (with the tight walk only); bit 2, the lookups prefetched a few groups
 * ahead (with interpolated seeks only). */
static int
daat_tight(int flags)
{
    return ((flags & 4) != 0) | (((flags & 20) == 20) << 1) | (((flags & 32) != 0) << 2);
}

PyDoc_STRVAR(bm25_daat_modes_doc,
"bm25_daat_modes(flags) -> int: the windowed walk's modes bm25_daat runs with these\n"
"flags (bit 0 the tight walk, bit 1 its eight-lane form, bit 2 the lookups prefetched\n"
"ahead), and bit 3 whether the windowed walk takes the tight loop (bit 0 alone); for\n"
"tests.");

static PyObject *
bm25_daat_modes(PyObject *self, PyObject *arg)
{
    (void)self;
    long flags = PyLong_AsLong(arg);
    if (flags == -1 && PyErr_Occurred()) return NULL;
    if (flags < 0 || flags > 63) {
        PyErr_SetString(PyExc_ValueError, "prefetch: flags 0 to 63");
        return NULL;
    }
    int tight = daat_tight((int)flags);
    return PyLong_FromLong(tight | (WALKS_TIGHT(tight) ? 8 : 0));
}

PyDoc_STRVAR(bm25_daat_doc,
"bm25_daat(terms, cursors, lengths, a_part, b_part, k1, b, avgdl, up, theta, budget,\n"
"          seed, nums_out, scores_out, sticky=None, offer=None,\n"
"          prefetch=0, split_room=1.0, codes=None, more=0, seed_room=0,\n"
"          seconds=0.0) -> (int, bool)\n\n"
"Document-at-a-time MaxScore with block-max windows over the query's terms, a list of\n"
"(wi, ub, groups, tfs, count, blocks, nblocks) in the query's order (ub: a bound on the\n"
"term's contribution, slack included; blocks: (largest tf, smallest length) of each of\n"
"the first nblocks blocks). cursors (int64, one per term) hold the position in each list\n"
"between calls. Writes the groups that may reach theta, ascending, with their exact\n"
"score (query order, norm = k1 * ((1 - b) + b * len / avgdl)) to nums_out and\n"
"scores_out, up to their length; returns (how many, whether every list is done).\n"
"About budget postings of work per call. With seed >= 0 instead: every group of that\n"
"term's list in turn, with its exact score (a first theta). With sticky (uint8, one per\n"
"term, zero at first, kept between calls) the cost-aware split of the terms: the\n"
"non-essential ones are chosen greedily by bound per posting left, not by bound alone.\n"
"With offer, (table, version, accept, hs, hq, hr, hn, seen, remember[, first[, columns]])\n"
"(sticky needed; first: None or int64, a lower bound on each group's seqs, to pass over\n"
"ties; columns true: a table slot is the group's records, a list or its one record,\n"
"not an object with _recs):\n"
"each group found is offered at once to the caller's heap of records instead (hs, hq,\n"
"hr: scores, minus seqs, records; hn: its size and seen's; seen: the groups the\n"
"seeding offered, ascending, added to if remember), theta is the heap's worst once it\n"
"is full (the theta argument is ignored) and rises within the call; the count returned\n"
"is then that of the seeding's groups only. With prefetch & 1 (sticky needed), the\n"
"windowed walk prefetches the length of the group some postings ahead; with prefetch &\n"
"2, the lookups' galloping and binary searches prefetch their next probes; with\n"
"prefetch & 4 (sticky needed), the windowed walk runs its tight loop, registers only\n"
"and marks without a branch (the same results); with prefetch & 8, the lookups'\n"
"searches start from a position interpolated between the cursor's group and the\n"
"list's last (the same positions); with prefetch & 16 (and 4), the tight loop walks\n"
"eight postings at a time where the CPU has AVX-512; with prefetch & 32 (and 8), the\n"
"lookups of a marked group are prefetched two groups ahead (the same results). With split_room < 1 (sticky needed\n"
"for an effect), the cost-aware split takes non-essential terms only while their\n"
"bounds sum below split_room * theta (theta > 0): fewer lookups for a longer walk\n"
"(the same results). With codes (uint8, one-byte length codes, at least one per length:\n"
"bm25.postings.length_codes) and the tight walk, the walk reads the codes and marks\n"
"groups by upper bounds from each code's lowest length (bm25_code_floors; a length\n"
"below 128 is its own code); the lookups and exact scores read the lengths: the same\n"
"groups at or above theta with the same scores, perhaps more below it. more (flags 0\n"
"to 32767): with more & 1 and codes, the lookups' saturations come from the codes as well\n"
"(upper bounds again), and only the exact scores read the lengths; with more & 2 (and\n"
"prefetch & 8), the seeding asks for the lookups of the seed's group a few on before\n"
"this one's; with more & 4, a window in which few postings were walked has only their\n"
"scores cleared, not its whole score array; with more & 8 (and offer), the groups a\n"
"window offers have their first seqs and table slots prefetched at once; with more &\n"
"16 (and sticky), a term given as a 10-tuple (..., bits, upto, dpos), bits not None\n"
"(uint8, four groups a byte, two bits each: 0 absent, 1 or 2 the frequency, 3 three or\n"
"more; every group below upto, and the list's postings from dpos on those of the\n"
"groups at or above it), is looked up there, not sought in its list, except for a code\n"
"of 3 (and it is not the seed's term); with more & 32 (and 4), a window is cleared by\n"
"its postings below a quarter of its width, not an eighth; with more & 64, the walk over\n"
"the codes prefetches nothing where it runs its scalar loop (no AVX-512); where that\n"
"scalar loop runs without a prefetch, with more & 256 a posting of frequency 1 takes its\n"
"part from a table by code made once a call, and with more & 512 a group is marked by\n"
"comparing its partial score with the least score that reaches theta; with more & 1024\n"
"(and 512, and codes) the walk runs that scalar loop without a prefetch whatever the CPU\n"
"and prefetch say, marking nothing, and a window's marks are found after its walk from\n"
"its scores (the sparse clear's pass, or a scan of the window). With more & 2048 (offer\n"
"and sticky needed, no seed), the call runs to the end of the lists: each time a step\n"
"of budget postings ends short of it, the terms are split again at the heap's theta and\n"
"the next step runs in the same call, as the next call would (one call for what the\n"
"caller would drive step by step; it always returns done). With more & 4096 (and 2048,\n"
"offer, sticky and a seed): the seeding, then the walk to its end in the same call, as\n"
"a call with the seed and then one with more & 2048 would make them (the seeding's\n"
"groups remembered, at most seed_room of them if > 0, its positions from cursors; the\n"
"walk's from the start of the lists, written back to cursors). With more & 8192, the\n"
"windowed walk's scratch (its scores, marks, tables) is made once for the call, not\n"
"once a step. With more & 16384 (and 1024), a window whose essential lists have fewer\n"
"postings left than a quarter of the groups from its first on is walked marking by the\n"
"cut (more & 512), not scanned after. With seconds > 0 (and more & 2048), the walk to\n"
"the end returns between two steps once that many seconds have passed since the call\n"
"started (CLOCK_MONOTONIC; at least one step), not done: the next call with the same\n"
"arguments (no seed) goes on from there. The same results.");

/* The monotonic clock in seconds (CLOCK_MONOTONIC: Python's time.perf_counter on
 * Linux), or -1.0 where there is none (then a call limited in time runs one step). */
static double
mono_seconds(void)
{
#ifdef CLOCK_MONOTONIC
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
    return -1.0;
}

static PyObject *
bm25_daat(PyObject *self, PyObject *args)
{
    PyObject *o_terms, *o_cur, *o_len, *o_nums, *o_scores, *o_sticky = Py_None;
    PyObject *o_offer = Py_None, *o_hs, *o_hq, *o_hn, *o_seen, *o_first = Py_None;
    PyObject *o_codes = Py_None;
    double a_part, b_part, k1, b, avgdl, up, theta, split_room = 1.0;
    Py_ssize_t budget, seed, seed_room = 0;
    int prefetch = 0, more = 0;
    double seconds = 0.0;
    if (!PyArg_ParseTuple(args, "O!OOdddddddnnOO|OOidOind", &PyList_Type, &o_terms, &o_cur,
                          &o_len, &a_part, &b_part, &k1, &b, &avgdl, &up, &theta, &budget,
                          &seed, &o_nums, &o_scores, &o_sticky, &o_offer, &prefetch,
                          &split_room, &o_codes, &more, &seed_room, &seconds)) {
        return NULL;
    }
    /* seconds > 0 (with more & 2048): the walk to the end stops between two steps once
     * this long has passed since the call started (a caller's slice), not done. */
    if (!(seconds >= 0.0)) {
        PyErr_SetString(PyExc_ValueError, "seconds must be >= 0");
        return NULL;
    }
    const double started = seconds > 0.0 ? mono_seconds() : 0.0;
    if (more < 0 || more > 32767) {
        PyErr_SetString(PyExc_ValueError, "more: flags 0 to 32767");
        return NULL;
    }
    if (seed_room < 0) {
        PyErr_SetString(PyExc_ValueError, "seed_room must be >= 0");
        return NULL;
    }
    /* more & 4096: the seeding, then the walk to the end (more & 2048) in this call. */
    const int then_walk = (more & 4096) != 0;
    /* more & 8192: window_steps' scratch made once for the call (wbufs_t). */
    const int keep_bufs = (more & 8192) != 0;
    wbufs_t wb = {0};
    if (then_walk && (!(more & 2048) || seed < 0 || o_offer == Py_None || o_sticky == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "more & 4096 needs more & 2048, a seed, offer and sticky");
        return NULL;
    }
    /* more & 1: the lookups read the codes; & 2: the seeding's lookups prefetched ahead
     * (with interpolated seeks); & 4: a window's scores cleared by its postings. */
    const int lookup_codes = (more & 1) != 0, seed_ahead = (more & 2) && (prefetch & 8);
    const int sparse_clear = (more & 4) ? 1 + ((more & 32) != 0) : 0;
    /* more & 16: the lookups read the terms' dense arrays, where given (and not seeding
     * their own list). */
    const int dense_on = (more & 16) != 0;
    if (prefetch < 0 || prefetch > 63) {
        PyErr_SetString(PyExc_ValueError, "prefetch: flags 0 to 63");
        return NULL;
    }
    int tight = daat_tight(prefetch);
    seek_prefetch = (prefetch & 2) != 0;
    seek_interp = (prefetch & 8) != 0;
    prefetch &= 1;
    if (!(split_room > 0.0 && split_room <= 1.0)) {
        PyErr_SetString(PyExc_ValueError, "split_room must be in (0, 1]");
        return NULL;
    }
    Py_ssize_t q = PyList_GET_SIZE(o_terms);
    Py_buffer cur, len, nums, scores, sticky, hs, hq, hn, seen, first, codes;
    int have_sticky = 0, have_offer = 0, have_first = 0, have_codes = 0, codes_simd = 0;
    const uint8_t *use_codes = NULL;
    double den[BM25_CODES];
    offer_t offer, *po = NULL;
    PyObject *result = NULL;
    term_t *T = NULL;
    Py_ssize_t *ord = NULL;
    double *prefix = NULL;
    if (get(o_cur, &cur, K_I64, 1, "cursors") < 0) return NULL;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e1;
    if (get(o_nums, &nums, K_I64, 1, "nums_out") < 0) goto e2;
    if (get(o_scores, &scores, K_F64, 1, "scores_out") < 0) goto e3;
    if (o_sticky != Py_None) {
        if (get(o_sticky, &sticky, K_U8, 1, "sticky") < 0) goto done;
        have_sticky = 1;
    }
    if (LEN(cur) != q || LEN(scores) < LEN(nums) || q == 0 || seed < -1 || seed >= q ||
        (have_sticky && LEN(sticky) != q)) {
        PyErr_SetString(PyExc_ValueError, "cursors, sticky or outputs of the wrong size");
        goto done;
    }
    if (o_codes != Py_None) {
        /* The lengths' one-byte codes (bm25_length_codes), at least one per length. */
        if (get(o_codes, &codes, K_U8, 0, "codes") < 0) goto done;
        have_codes = 1;
        if (LEN(codes) < LEN(len)) {
            PyErr_SetString(PyExc_ValueError, "codes shorter than the lengths");
            goto done;
        }
        /* Upper bounds need a denominator that only grows with the length. */
        if (b_part >= 0.0 && a_part == a_part) {
            use_codes = (const uint8_t *)codes.buf;
            codes_simd = LEN(codes) % 4 == 0; /* the eight-lane walk reads aligned words */
            for (int k = 0; k < BM25_CODES; k++) den[k] = a_part + b_part * (double)code_floor(k);
        }
    }
    if ((more & 64) && use_codes) {
        /* more & 64 (knobs._SCALAR_NO_PREFETCH): the walk over the codes asks for no
         * code ahead where it runs its scalar loop (no walk_simd on this CPU): the
         * codes' 1 MB are read with enough loads in flight without it, and the prefetch
         * was six instructions of ~30 a posting. The eight-lane walk keeps it. */
#ifdef HAVE_SIMD_WALK
        int simd_walks = (tight & 2) && simd_walk_usable() && codes_simd;
#else
        int simd_walks = 0;
#endif
        if (!simd_walks) prefetch = 0;
    }
    if (o_offer != Py_None) {
        /* (table, version, accept, hs, hq, hr, hn, seen, remember[, first]): see
         * offer_t. */
        long long version;
        int remember, columns = 0;
        if (!have_sticky || !PyTuple_CheckExact(o_offer) ||
            !PyArg_ParseTuple(o_offer, "O!LOOOO!OOp|Op", &PyList_Type, &offer.table, &version,
                              &offer.accept, &o_hs, &o_hq, &PyList_Type, &offer.hr, &o_hn,
                              &o_seen, &remember, &o_first, &columns)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "offer: the windowed driver's 9- to 11-tuple");
            goto done;
        }
        offer.first = NULL;
        offer.first32 = NULL;
        offer.nfirst = 0;
        offer.ahead = (more & 8) != 0;
        offer.columns = columns;
        if (o_first != Py_None) {
            /* int64, or int32 (knobs._FIRST_SEQ32: each a lower bound clipped into int32) */
            if (PyObject_GetBuffer(o_first, &first, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
                PyErr_SetString(PyExc_ValueError, "first seqs: not a contiguous buffer");
                goto done;
            }
            have_first = 1;
            if (first.ndim != 1 || !(kind_ok(&first, K_I64) || kind_ok(&first, K_I32))) {
                PyErr_SetString(PyExc_ValueError, "first seqs: wrong element type or shape");
                goto done;
            }
            if (check_aligned(&first, "first seqs") < 0) goto done;
            if (first.itemsize == 4) offer.first32 = (const int32_t *)first.buf;
            else offer.first = (const int64_t *)first.buf;
            offer.nfirst = LEN(first);
        }
        if (get(o_hs, &hs, K_F64, 1, "heap scores") < 0) goto done;
        if (get(o_hq, &hq, K_I64, 1, "heap seqs") < 0) goto r1;
        if (get(o_hn, &hn, K_I64, 1, "heap counts") < 0) goto r2;
        if (get(o_seen, &seen, K_I64, 1, "seen") < 0) goto r3;
        have_offer = 1;
        offer.version = (int64_t)version;
        offer.remember = remember;
        offer.hs = (double *)hs.buf;
        offer.hq = (int64_t *)hq.buf;
        offer.hn = (int64_t *)hn.buf;
        offer.seen = (int64_t *)seen.buf;
        offer.limit = LEN(hs);
        offer.seen_cap = LEN(seen);
        if (offer.limit < 1 || LEN(hq) != offer.limit || PyList_GET_SIZE(offer.hr) != offer.limit ||
            LEN(hn) != 2 || offer.hn[0] < 0 || offer.hn[0] > offer.limit || offer.hn[1] < 0 ||
            offer.hn[1] > offer.seen_cap || (offer.accept != Py_None && !PyCallable_Check(offer.accept))) {
            PyErr_SetString(PyExc_ValueError, "offer: heap, counts or accept of the wrong shape");
            goto done;
        }
        po = &offer;
        theta = heap_theta(po);
    }
    T = PyMem_Calloc(q, sizeof(term_t));
    ord = PyMem_Malloc(q * sizeof(Py_ssize_t));
    prefix = PyMem_Malloc((q + 1) * sizeof(double));
    if (!T || !ord || !prefix) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *cursors = (int64_t *)cur.buf;
    for (Py_ssize_t i = 0; i < q; i++) {
        PyObject *entry = PyList_GET_ITEM(o_terms, i), *o_g, *o_tf, *o_blk;
        term_t *t = &T[i];
        if (!PyTuple_CheckExact(entry) ||
            (PyTuple_GET_SIZE(entry) != 7 && PyTuple_GET_SIZE(entry) != 10)) {
            PyErr_SetString(PyExc_TypeError, "terms: 7- or 10-tuples");
            goto done;
        }
        t->wi = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 0));
        t->ub = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 1));
        o_g = PyTuple_GET_ITEM(entry, 2);
        o_tf = PyTuple_GET_ITEM(entry, 3);
        t->count = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 4));
        o_blk = PyTuple_GET_ITEM(entry, 5);
        t->nblk = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 6));
        if (PyErr_Occurred()) goto done;
        if (get(o_g, &t->groups, K_I32, 0, "groups") < 0) goto done;
        t->have = 1;
        if (get(o_tf, &t->tfs, K_TF, 0, "tfs") < 0) goto done;
        t->have = 2;
        if (get(o_blk, &t->blocks, K_I32, 0, "blocks") < 0) goto done;
        t->have = 3;
        t->g = (const int32_t *)t->groups.buf;
        t->blk = (const int32_t *)t->blocks.buf;
        t->cur = cursors[i];
        if (t->count < 0 || t->count > LEN(t->groups) || t->count > LEN(t->tfs) ||
            t->nblk < 0 || t->nblk > t->count / BLOCK || 2 * t->nblk > LEN(t->blocks) ||
            t->cur < 0 || t->cur > t->count) {
            PyErr_SetString(PyExc_ValueError, "term counts, blocks or cursors out of range");
            goto done;
        }
        if (PyTuple_GET_SIZE(entry) == 10 && PyTuple_GET_ITEM(entry, 7) != Py_None) {
            /* (bits, upto, dpos): the term's dense array (uint8, four groups a byte), the
             * groups it covers and the list's first posting past them. */
            if (get(PyTuple_GET_ITEM(entry, 7), &t->dense, K_U8, 0, "dense") < 0) goto done;
            t->have_dense = 1;
            t->upto = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 8));
            t->dpos = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 9));
            if (PyErr_Occurred()) goto done;
            if (t->upto < 0 || t->upto > 4 * LEN(t->dense) || t->dpos < 0 || t->dpos > t->count) {
                PyErr_SetString(PyExc_ValueError, "dense: upto or dpos out of range");
                goto done;
            }
            if (dense_on && have_sticky && i != seed) t->bits = (const uint8_t *)t->dense.buf;
        }
    }
    /* Terms ord[0..ne) are non-essential: their bounds sum below theta. */
    Py_ssize_t ne = split_terms(T, q, theta, seed < 0 && have_sticky ? (uint8_t *)sticky.buf : NULL,
                                ord, prefix, split_room);
    const int32_t *ln = (const int32_t *)len.buf;
    Py_ssize_t nlen = LEN(len), room = LEN(nums), emitted = 0, work = 0;
    int64_t *out_n = (int64_t *)nums.buf;
    double *out_s = (double *)scores.buf;
    int finished = 0;
    if (ne == q) {
        finished = 1; /* no group can reach theta */
    }
    if (seed >= 0) {
        /* Seeding: every group of the seed term's list, its exact score. */
        term_t *s = &T[seed];
        Py_ssize_t seed_cap = then_walk && seed_room > 0 && seed_room < room ? seed_room : room;
        finished = 0;
        while (work < budget && emitted < seed_cap) {
            if (s->cur >= s->count) {
                finished = 1;
                break;
            }
            int64_t pivot = s->g[s->cur];
            if (pivot < 0 || pivot >= nlen) {
                PyErr_SetString(PyExc_ValueError, "group number beyond lengths");
                goto done;
            }
            if (seed_ahead && s->cur + LOOK_AHEAD < s->count) {
                /* The lookups (and the length) of the seed's group LOOK_AHEAD on,
                 * asked for before this one's: each pivot's seeks into the other
                 * lists, and its length, missed the caches one pivot after another. */
                int64_t next = s->g[s->cur + LOOK_AHEAD];
                if (next >= 0 && next < nlen) {
                    __builtin_prefetch(&ln[next]);
                    for (Py_ssize_t i = 0; i < q; i++) {
                        if (i != seed) prefetch_guess(&T[i], next);
                    }
                }
            }
            double dl = (double)ln[pivot];
            double norm = k1 * ((1.0 - b) + b * dl / avgdl), score = 0.0;
            for (Py_ssize_t i = 0; i < q; i++) {
                term_t *t = &T[i];
                double dtf;
                Py_ssize_t from;
                if (dense_lookup(t, pivot, &dtf, &from)) { /* not the seed's: bits NULL */
                    if (dtf > 0.0) score += t->wi * (dtf / (dtf + norm));
                    continue;
                }
                t->cur = seek(t->g, from, t->count, pivot);
                if (t->cur < t->count && t->g[t->cur] == pivot) {
                    double tf = tf_of(t, t->cur);
                    score += t->wi * (tf / (tf + norm));
                }
            }
            work += q;
            out_n[emitted] = pivot;
            out_s[emitted] = score;
            emitted++;
            s->cur++;
        }
        if (po && offer_found(po, out_n, out_s, emitted) < 0) goto done;
        if (!then_walk) goto out;
        /* more & 4096: what the walk's call (more & 2048, no seed) would start from: every
         * list from its start, the seed's term looked up in its dense array too, the
         * groups offered from now on not remembered, theta the heap's worst, the split
         * made there with the sticky marks. */
        for (Py_ssize_t i = 0; i < q; i++) {
            T[i].cur = 0;
            T[i].xcur = 0;
            T[i].at = 0.0;
        }
        if (dense_on && T[seed].have_dense) T[seed].bits = (const uint8_t *)T[seed].dense.buf;
        po->remember = 0;
        emitted = 0;
        theta = heap_theta(po);
        ne = split_terms(T, q, theta, (uint8_t *)sticky.buf, ord, prefix, split_room);
        finished = ne == q; /* no group can reach theta */
    }
    if (have_sticky) {
        /* more & 2048 (with offer): to the end, step after step in this call. */
        const int to_end = (more & 2048) && po;
        for (;;) {
            if (!finished && window_steps(T, q, ord, ne, prefix, ln, nlen, a_part, b_part, k1,
                                          b, avgdl, up, theta, budget, room, out_n, out_s,
                                          &emitted, &finished, po, prefetch, tight, use_codes,
                                          den, codes_simd, lookup_codes, sparse_clear,
                                          (more & 256) != 0, (more & 512) != 0,
                                          (more & 1024) != 0, (more & 16384) != 0,
                                          keep_bufs ? &wb : NULL) < 0) {
                goto done;
            }
            if (!to_end || finished) break;
            if (seconds > 0.0) {
                /* The caller's slice is over: return between two steps, as a call
                 * without more & 2048 would; the next call goes on from here. */
                double now = mono_seconds();
                if (now < 0.0 || started < 0.0 || now - started >= seconds) break;
            }
            /* What the next call would do with the same arguments: the step's state as a
             * call's set-up leaves it (emitted 0: offered; the cursors kept in T), theta
             * the heap's worst, and the split made again there. */
            emitted = 0;
            for (Py_ssize_t i = 0; i < q; i++) {
                T[i].xcur = 0;
                T[i].at = 0.0;
            }
            theta = heap_theta(po);
            ne = split_terms(T, q, theta, (uint8_t *)sticky.buf, ord, prefix, split_room);
            if (ne == q) finished = 1; /* no group can reach theta */
        }
        goto out;
    }
    /* The pivot: the lowest group at the essential terms' positions. */
    int64_t pivot = INT64_MAX, wend = -1; /* groups up to wend passed the window check */
    for (Py_ssize_t i = ne; i < q; i++) {
        term_t *t = &T[ord[i]];
        if (t->cur < t->count && t->g[t->cur] < pivot) pivot = t->g[t->cur];
    }
    while (!finished && work < budget && emitted < room) {
        if (pivot == INT64_MAX) {
            finished = 1;
            break;
        }
        if (theta > -INFINITY && pivot > wend) {
            /* Block-max window: up to the end of the first block to end among the
             * essential terms' current ones; every group in it is bounded by those
             * blocks' bounds plus the non-essential terms' bounds. */
            int64_t upto = INT64_MAX;
            for (Py_ssize_t i = ne; i < q; i++) {
                term_t *t = &T[ord[i]];
                if (t->cur >= t->count) continue;
                Py_ssize_t k = t->cur / BLOCK;
                int64_t end = k < t->nblk ? t->g[(k + 1) * BLOCK - 1] : t->g[t->count - 1];
                if (end < upto) upto = end;
            }
            /* Only the terms with a posting in [pivot, upto] add their block's bound. */
            double bound = prefix[ne];
            for (Py_ssize_t i = ne; i < q; i++) {
                term_t *t = &T[ord[i]];
                if (t->cur >= t->count || t->g[t->cur] > upto) continue;
                Py_ssize_t k = t->cur / BLOCK;
                if (k < t->nblk) {
                    double tf = (double)t->blk[2 * k], dl = (double)t->blk[2 * k + 1];
                    double sat = tf / (tf + (a_part + b_part * dl));
                    bound += t->wi * sat * up;
                } else {
                    bound += t->ub;
                }
            }
            work += 2 * (q - ne);
            if (bound * up < theta) { /* skip the window */
                pivot = INT64_MAX;
                for (Py_ssize_t i = ne; i < q; i++) {
                    term_t *t = &T[ord[i]];
                    t->cur = seek(t->g, t->cur, t->count, upto + 1);
                    if (t->cur < t->count && t->g[t->cur] < pivot) pivot = t->g[t->cur];
                }
                continue;
            }
            wend = upto;
        }
        if (pivot < 0 || pivot >= nlen) {
            PyErr_SetString(PyExc_ValueError, "group number beyond lengths");
            goto done;
        }
        /* The essential terms at the pivot: their frequencies, the partial score, past
         * the pivot, and the next pivot, in one pass. */
        double dl = (double)ln[pivot], partial = 0.0;
        int64_t next = INT64_MAX;
        for (Py_ssize_t i = ne; i < q; i++) {
            term_t *t = &T[ord[i]];
            t->at = -1.0;
            if (t->cur < t->count && t->g[t->cur] == pivot) {
                double tf = t->at = tf_of(t, t->cur);
                partial += t->wi * (tf / (tf + (a_part + b_part * dl)));
                t->cur++;
            }
            if (t->cur < t->count && t->g[t->cur] < next) next = t->g[t->cur];
        }
        work += q - ne;
        partial = look_up(T, ord, ne, prefix, pivot, partial, a_part + b_part * dl, up, theta,
                          &work);
        if (partial * up >= theta) {
            /* Every term's frequency at the pivot is known: the exact score, in the
             * query's order. */
            double norm = k1 * ((1.0 - b) + b * dl / avgdl), score = 0.0;
            for (Py_ssize_t i = 0; i < q; i++) {
                double tf = T[i].at;
                if (tf >= 0.0) score += T[i].wi * (tf / (tf + norm));
            }
            out_n[emitted] = pivot;
            out_s[emitted] = score;
            emitted++;
        }
        pivot = next;
    }
out:
    for (Py_ssize_t i = 0; i < q; i++) {
        cursors[i] = T[i].cur;
    }
    result = Py_BuildValue("nO", emitted, finished ? Py_True : Py_False);
done:
    if (T) {
        for (Py_ssize_t i = 0; i < q; i++) {
            if (T[i].have_dense) PyBuffer_Release(&T[i].dense);
            if (T[i].have > 2) PyBuffer_Release(&T[i].blocks);
            if (T[i].have > 1) PyBuffer_Release(&T[i].tfs);
            if (T[i].have > 0) PyBuffer_Release(&T[i].groups);
        }
    }
    PyMem_Free(T);
    PyMem_Free(ord);
    PyMem_Free(prefix);
    wbufs_free(&wb);
    if (have_offer) {
        PyBuffer_Release(&seen);
    r3:
        PyBuffer_Release(&hn);
    r2:
        PyBuffer_Release(&hq);
    r1:
        PyBuffer_Release(&hs);
    }
    if (have_first) PyBuffer_Release(&first);
    if (have_codes) PyBuffer_Release(&codes);
    if (have_sticky) PyBuffer_Release(&sticky);
    PyBuffer_Release(&scores);
e3:
    PyBuffer_Release(&nums);
e2:
    PyBuffer_Release(&len);
e1:
    PyBuffer_Release(&cur);
    return result;
}

/* ------------------------------------------------------------------ add */

static PyObject *s_groups, *s_tfs, *s_df, *s_num, *s_append, *s_typecode, *array_type;

/* obj.<name> += 1 */
static int
bump(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (!v) return -1;
    long long d = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (d == -1 && PyErr_Occurred()) return -1;
    PyObject *w = PyLong_FromLongLong(d + 1);
    if (!w) return -1;
    int r = PyObject_SetAttr(obj, name, w);
    Py_DECREF(w);
    return r;
}

/* Append the group number and the frequency to obj's posting list (the frequencies
 * switch to int32, a new array, once one exceeds 255), count the df; obj.num or -1. */
static long long
post(PyObject *obj, PyObject *num, long long tf)
{
    PyObject *groups = PyObject_GetAttr(obj, s_groups);
    if (!groups) return -1;
    PyObject *r = PyObject_CallMethodOneArg(groups, s_append, num);
    Py_DECREF(groups);
    if (!r) return -1;
    Py_DECREF(r);
    PyObject *tfs = PyObject_GetAttr(obj, s_tfs);
    if (!tfs) return -1;
    if (tf > 255) {
        PyObject *code = PyObject_GetAttr(tfs, s_typecode);
        if (!code) goto fail;
        int bytes = PyUnicode_Check(code) && PyUnicode_CompareWithASCIIString(code, "B") == 0;
        Py_DECREF(code);
        if (bytes) { /* replaced, never resized: readers may hold the old one */
            PyObject *wide = PyObject_CallFunction(array_type, "sO", "i", tfs);
            if (!wide) goto fail;
            Py_SETREF(tfs, wide);
            if (PyObject_SetAttr(obj, s_tfs, tfs) < 0) goto fail;
        }
    }
    PyObject *o_tf = PyLong_FromLongLong(tf);
    if (!o_tf) goto fail;
    r = PyObject_CallMethodOneArg(tfs, s_append, o_tf);
    Py_DECREF(o_tf);
    Py_DECREF(tfs);
    if (!r) return -1;
    Py_DECREF(r);
    if (bump(obj, s_df) < 0) return -1;
    PyObject *n = PyObject_GetAttr(obj, s_num);
    if (!n) return -1;
    long long t = PyLong_AsLongLong(n);
    Py_DECREF(n);
    if (t < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "negative term number");
    return t;
fail:
    Py_DECREF(tfs);
    return -1;
}

PyDoc_STRVAR(bm25_add_terms_doc,
"bm25_add_terms(terms, index_terms, term_table, num, make_term) -> list[int]\n\n"
"The term loop of a new group: for each distinct term of the list terms (str), in\n"
"first-occurrence order, with its count tf: its posting list index_terms[term] (made\n"
"as make_term(term, len(term_table)) and added to both if missing) gets num and tf\n"
"appended and its df raised by one. Returns term.num << 8 | min(tf, 255) per term.\n"
"O(len(terms)).");

static PyObject *
bm25_add_terms(PyObject *self, PyObject *args)
{
    PyObject *terms, *index_terms, *table, *num, *make_term;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O", &PyList_Type, &terms, &PyDict_Type, &index_terms,
                          &PyList_Type, &table, &PyLong_Type, &num, &make_term)) {
        return NULL;
    }
    PyObject *counts = PyDict_New(), *out = NULL;
    if (!counts) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(terms); i++) {
        PyObject *term = PyList_GET_ITEM(terms, i);
        if (!PyUnicode_CheckExact(term)) {
            PyErr_SetString(PyExc_TypeError, "terms must be str");
            goto done;
        }
        PyObject *c = PyDict_GetItemWithError(counts, term);
        long long n = 0;
        if (c) {
            n = PyLong_AsLongLong(c);
        } else if (PyErr_Occurred()) {
            goto done;
        }
        PyObject *c1 = PyLong_FromLongLong(n + 1);
        if (!c1) goto done;
        int r = PyDict_SetItem(counts, term, c1);
        Py_DECREF(c1);
        if (r < 0) goto done;
    }
    out = PyList_New(0);
    if (!out) goto done;
    Py_ssize_t pos = 0;
    PyObject *term, *c;
    while (PyDict_Next(counts, &pos, &term, &c)) {
        long long tf = PyLong_AsLongLong(c);
        PyObject *obj = PyDict_GetItemWithError(index_terms, term); /* borrowed */
        if (!obj) {
            if (PyErr_Occurred()) goto fail;
            PyObject *made = PyObject_CallFunction(make_term, "On", term, PyList_GET_SIZE(table));
            if (!made) goto fail;
            int r = PyDict_SetItem(index_terms, term, made);
            if (r == 0) r = PyList_Append(table, made);
            Py_DECREF(made); /* held by the dict */
            if (r < 0) goto fail;
            obj = made;
        }
        Py_INCREF(obj);
        long long t = post(obj, num, tf);
        Py_DECREF(obj);
        if (t < 0) goto fail;
        PyObject *packed = PyLong_FromLongLong(t << 8 | (tf < 255 ? tf : 255));
        if (!packed) goto fail;
        int r = PyList_Append(out, packed);
        Py_DECREF(packed);
        if (r < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_DECREF(counts);
    return out;
}

/* ------------------------------------------------------------------ image */

PyDoc_STRVAR(bm25_image_check_doc,
"bm25_image_check(packed, group_ends, postings, post_ends, tfs, lengths, sizes,\n"
"                 dfs_out, wide_out, pool_width=0, small=False)\n"
"    -> (int, bytes | None, bytes | None)\n\n"
"The numeric checks of a BM25 index image (bm25/persist.py, restore), in one pass\n"
"over each side with the GIL released. Groups: size = len(lengths); terms: count =\n"
"len(post_ends) - 1. packed (int32 or int64): each group's terms, term << 8 | min(tf,\n"
"255), group g's at group_ends[g]..group_ends[g + 1] (int64, size + 1); postings\n"
"(int32) and tfs (int32, as many): term t's posting list at post_ends[t]..post_ends[t +\n"
"1] (int64, count + 1). The first item is 0 when every check passes, else the first\n"
"that fails, in this order: 1 the lists' offsets (not 0 first, not strictly rising, not\n"
"ending at len(postings)); 2 a posting outside [0, size); 3 a list not strictly\n"
"ascending; 4 a frequency below 1; 5 the groups' offsets (not 0 first, falling, not\n"
"ending at len(packed)); 7 a group's term outside [0, count), or a capped frequency\n"
"below 1; 8 the two sides' (term, group, capped frequency) triples differ (an\n"
"order-independent 64-bit hash of each side, bm25.persist._mix's: it covers each group's\n"
"count of terms, which numpy's path checks apart as 6); 9 a length not the sum of its\n"
"group's frequencies (its capped ones on the groups' side, plus what the postings'\n"
"side has above 255: the exact sum once 8 passed). Once checks\n"
"1-4 passed: dfs_out[t] (int64, count) the sum of sizes[g] (int64, size; None: 1) over\n"
"t's postings, wide_out[t] (uint8, count) 1 where a frequency of t exceeds 255.\n"
"pool_width 2, 4 or 8: the second item the bytes of every packed term's number\n"
"(packed >> 8) as uint16, uint32 or int64 (meaningful once check 7 passed: then it\n"
"fits), else None; small true: the third the bytes of every frequency's low byte\n"
"(uint8), else None. ValueError for buffers of the wrong kind or length, or another\n"
"pool_width (nothing written then). O(size + count + len(postings) + len(packed));\n"
"8 bytes a group of scratch, touched only where a frequency exceeds 255: the postings'\n"
"pass reads nothing by group number (a cache miss a posting at 1M groups).");

static inline uint64_t
image_mix(uint64_t term, uint64_t group, uint64_t tf, uint64_t size)
{
    uint64_t k = (term * size + group) << 8 | tf;
    k *= 0x9E3779B97F4A7C15ULL;
    k ^= k >> 29;
    k *= 0xBF58476D1CE4E5B9ULL;
    k ^= k >> 32;
    return k;
}

/* The checks of bm25_image_check on raw arrays (the GIL released by the caller);
 * excess: size zeroed int64, each group's frequencies above 255 (their part over it)
 * on the postings' side; pool (pool_width bytes an item) and small: NULL, or room for
 * npacked and npost items. */
static int
image_check_run(const void *packed, int wide, Py_ssize_t npacked, const int64_t *g_ends,
                const int32_t *post, Py_ssize_t npost, const int64_t *p_ends, const int32_t *tfs,
                const int32_t *lengths, Py_ssize_t size, const int64_t *sizes, Py_ssize_t count,
                int64_t *dfs, uint8_t *wide_out, int64_t *excess, char *pool, int pool_width,
                uint8_t *small)
{
    /* 1: the lists tile the postings, each non-empty */
    if (p_ends[0] != 0 || p_ends[count] != npost) return 1;
    for (Py_ssize_t t = 0; t < count; t++) {
        if (p_ends[t + 1] <= p_ends[t]) return 1;
    }
    /* 2: every posting a group */
    for (Py_ssize_t i = 0; i < npost; i++) {
        if (post[i] < 0 || post[i] >= size) return 2;
    }
    /* 3, 4, and the postings' side */
    int bad_order = 0, bad_tf = 0;
    uint64_t post_side = 0, usize = (uint64_t)size;
    for (Py_ssize_t t = 0; t < count; t++) {
        int64_t df = 0;
        int32_t top = 0, prev = -1;
        for (int64_t i = p_ends[t]; i < p_ends[t + 1]; i++) {
            int32_t g = post[i], tf = tfs[i];
            bad_order |= g <= prev;
            prev = g;
            bad_tf |= tf < 1;
            if (tf > top) top = tf;
            df += sizes ? sizes[g] : 1;
            if (tf > 255) excess[g] += tf - 255; /* (rare: the only read by group) */
            post_side += image_mix((uint64_t)t, (uint64_t)g, (uint64_t)(tf < 255 ? tf : 255), usize);
        }
        dfs[t] = df;
        wide_out[t] = top > 255;
    }
    if (bad_order) return 3;
    if (bad_tf) return 4;
    if (small) {
        for (Py_ssize_t i = 0; i < npost; i++) small[i] = (uint8_t)tfs[i];
    }
    /* 5 (6, each group's count of terms, is in 8's hash) */
    if (g_ends[0] != 0 || g_ends[size] != npacked) return 5;
    for (Py_ssize_t g = 0; g < size; g++) {
        if (g_ends[g + 1] < g_ends[g]) return 5;
    }
    /* 7, the groups' side, their capped sums and the pool's numbers */
    uint64_t group_side = 0;
    int bad_term = 0, bad_length = 0;
    for (Py_ssize_t g = 0; g < size; g++) {
        int64_t sum = excess[g];
        for (int64_t i = g_ends[g]; i < g_ends[g + 1]; i++) {
            int64_t v = wide ? ((const int64_t *)packed)[i] : (int64_t)((const int32_t *)packed)[i];
            int64_t num = v >> 8, capped = v & 255;
            bad_term |= num < 0 || num >= count || capped < 1;
            group_side += image_mix((uint64_t)num, (uint64_t)g, (uint64_t)capped, usize);
            sum += capped;
            if (pool_width == 2) {
                ((uint16_t *)pool)[i] = (uint16_t)num;
            } else if (pool_width == 4) {
                ((uint32_t *)pool)[i] = (uint32_t)num;
            } else if (pool_width == 8) {
                ((int64_t *)pool)[i] = num;
            }
        }
        bad_length |= sum != (int64_t)lengths[g];
    }
    if (bad_term) return 7;
    if (group_side != post_side) return 8;
    if (bad_length) return 9;
    return 0;
}

static PyObject *
bm25_image_check(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o_packed, *o_gends, *o_post, *o_pends, *o_tfs, *o_len, *o_sizes, *o_dfs, *o_wide;
    int pool_width = 0, want_small = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO|ip", &o_packed, &o_gends, &o_post, &o_pends, &o_tfs,
                          &o_len, &o_sizes, &o_dfs, &o_wide, &pool_width, &want_small)) {
        return NULL;
    }
    if (pool_width != 0 && pool_width != 2 && pool_width != 4 && pool_width != 8) {
        PyErr_SetString(PyExc_ValueError, "pool_width: 0, 2, 4 or 8");
        return NULL;
    }
    Py_buffer packed, gends, post, pends, tfs, len, sizes, dfs, wide;
    PyObject *result = NULL, *o_pool = NULL, *o_small = NULL;
    int wide_packed = 0;
    if (PyObject_GetBuffer(o_packed, &packed, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_SetString(PyExc_ValueError, "packed: not a contiguous buffer");
        return NULL;
    }
    if (packed.ndim != 1 || !(kind_ok(&packed, K_I32) || kind_ok(&packed, K_I64))) {
        PyErr_SetString(PyExc_ValueError, "packed: wrong element type or shape");
        PyBuffer_Release(&packed);
        return NULL;
    }
    if (check_aligned(&packed, "packed") < 0) {
        PyBuffer_Release(&packed);
        return NULL;
    }
    wide_packed = packed.itemsize == 8;
    if (get(o_gends, &gends, K_I64, 0, "group_ends") < 0) goto e0;
    if (get(o_post, &post, K_I32, 0, "postings") < 0) goto e1;
    if (get(o_pends, &pends, K_I64, 0, "post_ends") < 0) goto e2;
    if (get(o_tfs, &tfs, K_I32, 0, "tfs") < 0) goto e3;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e4;
    if (o_sizes == Py_None) {
        sizes.buf = NULL;
        sizes.obj = NULL;
        sizes.len = 0;
        sizes.itemsize = 8;
    } else if (get(o_sizes, &sizes, K_I64, 0, "sizes") < 0) {
        goto e5;
    }
    if (get(o_dfs, &dfs, K_I64, 1, "dfs_out") < 0) goto e6;
    if (get(o_wide, &wide, K_U8, 1, "wide_out") < 0) goto e7;
    {
        Py_ssize_t size = LEN(len), count = LEN(pends) - 1;
        if (LEN(gends) != size + 1 || count < 0 || LEN(tfs) != LEN(post) ||
            (sizes.buf != NULL && LEN(sizes) != size) || LEN(dfs) != count ||
            LEN(wide) != count) {
            PyErr_SetString(PyExc_ValueError, "bm25_image_check: lengths do not match");
            goto done;
        }
        if (pool_width) {
            o_pool = PyBytes_FromStringAndSize(NULL, LEN(packed) * pool_width);
            if (!o_pool) goto done;
        }
        if (want_small) {
            o_small = PyBytes_FromStringAndSize(NULL, LEN(post));
            if (!o_small) goto done;
        }
        int64_t *excess = PyMem_RawCalloc((size_t)size + 1, sizeof(int64_t));
        if (!excess) {
            PyErr_NoMemory();
            goto done;
        }
        int code;
        char *pool_buf = o_pool ? PyBytes_AS_STRING(o_pool) : NULL;
        uint8_t *small_buf = o_small ? (uint8_t *)PyBytes_AS_STRING(o_small) : NULL;
        Py_BEGIN_ALLOW_THREADS
        code = image_check_run(packed.buf, wide_packed, LEN(packed), (const int64_t *)gends.buf,
                               (const int32_t *)post.buf, LEN(post), (const int64_t *)pends.buf,
                               (const int32_t *)tfs.buf, (const int32_t *)len.buf, size,
                               (const int64_t *)sizes.buf, count, (int64_t *)dfs.buf,
                               (uint8_t *)wide.buf, excess, pool_buf, pool_width, small_buf);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(excess);
        if (code) { /* the bytes may be partly written: none handed out */
            Py_CLEAR(o_pool);
            Py_CLEAR(o_small);
        }
        result = Py_BuildValue("(iOO)", code, o_pool ? o_pool : Py_None,
                               o_small ? o_small : Py_None);
    }
done:
    Py_XDECREF(o_pool);
    Py_XDECREF(o_small);
    PyBuffer_Release(&wide);
e7:
    PyBuffer_Release(&dfs);
e6:
    if (sizes.obj != NULL) PyBuffer_Release(&sizes);
e5:
    PyBuffer_Release(&len);
e4:
    PyBuffer_Release(&tfs);
e3:
    PyBuffer_Release(&pends);
e2:
    PyBuffer_Release(&post);
e1:
    PyBuffer_Release(&gends);
e0:
    PyBuffer_Release(&packed);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"bm25_blocks", bm25_blocks, METH_VARARGS, bm25_blocks_doc},
    {"bm25_daat", bm25_daat, METH_VARARGS, bm25_daat_doc},
    {"bm25_daat_modes", bm25_daat_modes, METH_O, bm25_daat_modes_doc},
    {"bm25_dense_fill", bm25_dense_fill, METH_VARARGS, bm25_dense_fill_doc},
    {"bm25_code_floors", bm25_code_floors, METH_NOARGS, bm25_code_floors_doc},
    {"bm25_walked", bm25_walked, METH_NOARGS, bm25_walked_doc},
    {"bm25_add_terms", bm25_add_terms, METH_VARARGS, bm25_add_terms_doc},
    {"bm25_image_check", bm25_image_check, METH_VARARGS, bm25_image_check_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "actormem._index._cbm25",
    .m_doc = "The compiled core of the BM25 index (see actormem/_index/kernels.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cbm25(void)
{
    s_groups = PyUnicode_InternFromString("groups");
    s_tfs = PyUnicode_InternFromString("tfs");
    s_df = PyUnicode_InternFromString("df");
    s_num = PyUnicode_InternFromString("num");
    s_append = PyUnicode_InternFromString("append");
    s_typecode = PyUnicode_InternFromString("typecode");
    s_recs = PyUnicode_InternFromString("_recs");
    s_seq = PyUnicode_InternFromString("seq");
    s_born = PyUnicode_InternFromString("born");
    s_died = PyUnicode_InternFromString("died");
    if (!s_groups || !s_tfs || !s_df || !s_num || !s_append || !s_typecode || !s_recs || !s_seq ||
        !s_born || !s_died) {
        return NULL;
    }
    array_type = import_array_type();
    if (!array_type) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "BLOCK", BLOCK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
