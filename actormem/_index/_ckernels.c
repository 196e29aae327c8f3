/* Compiled kernels of the scoring indexes (optional: actormem/_index/kernels.py falls
 * back to numpy, the reference, when this module is not built).
 *
 * Each function does, in one pass over the index's own arrays, what a few numpy
 * operations of the pure-Python path do, with the same IEEE double operations in the
 * same order (built with -ffp-contract=off: no fused multiply-add), so results are bit
 * for bit those of the reference. Every call is bounded by its arguments (a slice of a
 * posting list, a chunk of groups): the caller yields between calls, and no buffer is
 * held across calls (the owner appends to the posting arrays between them).
 *
 * Arguments are checked by kernels.py before they get here; the checks below repeat
 * what memory safety needs (formats, lengths, index ranges) and raise ValueError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

#include "_kernels_common.h"

/* ------------------------------------------------------------------ buffers */

static PyObject *
range_error(const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s out of range", what);
    return NULL;
}

/* ------------------------------------------------------------------ BM25 */

PyDoc_STRVAR(bm25_accumulate_doc,
"bm25_accumulate(groups, tfs, start, end, lengths, acc, wi, a_part, b_part, tau,\n"
"                in_top, nums_out, hot_out) -> (int, int)\n\n"
"For the postings start..end: acc[g] = wi * (tf / ((len[g] * b_part + a_part) + tf))\n"
"+ acc[g]; nums_out gets the group numbers, hot_out those whose new value is above\n"
"tau and that are not in_top. Returns (how many went to hot_out, how many were above\n"
"tau). O(end - start).");

static PyObject *
bm25_accumulate(PyObject *self, PyObject *args)
{
    PyObject *result = NULL;
    PyObject *o_groups, *o_tfs, *o_len, *o_acc, *o_top, *o_nums, *o_hot;
    Py_ssize_t start, end;
    double wi, a_part, b_part, tau;
    if (!PyArg_ParseTuple(args, "OOnnOOddddOOO", &o_groups, &o_tfs, &start, &end, &o_len,
                          &o_acc, &wi, &a_part, &b_part, &tau, &o_top, &o_nums, &o_hot)) {
        return NULL;
    }
    Py_buffer groups, tfs, len, acc, top, nums, hot;
    if (get(o_groups, &groups, K_I32, 0, "groups") < 0) return NULL;
    if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) goto e1;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e2;
    if (get(o_acc, &acc, K_F64, 1, "acc") < 0) goto e3;
    if (get(o_top, &top, K_BOOL, 0, "in_top") < 0) goto e4;
    if (get(o_nums, &nums, K_I64, 1, "nums_out") < 0) goto e5;
    if (get(o_hot, &hot, K_I64, 1, "hot_out") < 0) goto e6;
    Py_ssize_t count = end - start;
    if (start < 0 || end < start || end > LEN(groups) || end > LEN(tfs) ||
        LEN(nums) < count || LEN(hot) < count) {
        range_error("start/end");
        goto done;
    }
    {
        const int32_t *g = (const int32_t *)groups.buf;
        const int32_t *ln = (const int32_t *)len.buf;
        double *a = (double *)acc.buf;
        const uint8_t *in_top = (const uint8_t *)top.buf;
        int64_t *out = (int64_t *)nums.buf, *h = (int64_t *)hot.buf;
        Py_ssize_t limit = LEN(acc);
        if (LEN(len) < limit) limit = LEN(len);
        if (LEN(top) < limit) limit = LEN(top);
        Py_ssize_t k = 0, above = 0;
        for (Py_ssize_t i = start; i < end; i++) {
            int32_t num = g[i];
            if (num < 0 || num >= limit) {
                range_error("group number");
                goto done;
            }
            double tf = tf_at(&tfs, i);
            double den = ((double)ln[num] * b_part + a_part) + tf;
            double after = (tf / den) * wi + a[num];
            a[num] = after;
            out[i - start] = num;
            if (after > tau) {
                above++;
                if (!in_top[num]) {
                    h[k++] = num;
                }
            }
        }
        result = Py_BuildValue("nn", k, above);
    }
done:
    PyBuffer_Release(&hot);
e6:
    PyBuffer_Release(&nums);
e5:
    PyBuffer_Release(&top);
e4:
    PyBuffer_Release(&acc);
e3:
    PyBuffer_Release(&len);
e2:
    PyBuffer_Release(&tfs);
e1:
    PyBuffer_Release(&groups);
    return result;
}

/* The first position of `key` in the ascending g[0..n), or n. */
static inline Py_ssize_t
lower_bound(const int32_t *g, Py_ssize_t n, int32_t key)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (g[mid] < key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

PyDoc_STRVAR(bm25_refine_doc,
"bm25_refine(groups, tfs, count, cands, part, lengths, wi, a_part, b_part, up, rest,\n"
"            theta, keep_out) -> int\n\n"
"For each candidate group c (int32) found among the first count postings (binary\n"
"search): part += wi * (tf / (tf + (a_part + b_part * len[c]))); then keep_out =\n"
"part * up + rest >= theta. Returns how many are kept. O(len(cands) log count).");

static PyObject *
bm25_refine(PyObject *self, PyObject *args)
{
    PyObject *result = NULL;
    PyObject *o_groups, *o_tfs, *o_cands, *o_part, *o_len, *o_keep;
    Py_ssize_t count;
    double wi, a_part, b_part, up, rest, theta;
    if (!PyArg_ParseTuple(args, "OOnOOOddddddO", &o_groups, &o_tfs, &count, &o_cands,
                          &o_part, &o_len, &wi, &a_part, &b_part, &up, &rest, &theta,
                          &o_keep)) {
        return NULL;
    }
    Py_buffer groups, tfs, cands, part, len, keep;
    if (get(o_groups, &groups, K_I32, 0, "groups") < 0) return NULL;
    if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) goto e1;
    if (get(o_cands, &cands, K_I32, 0, "cands") < 0) goto e2;
    if (get(o_part, &part, K_F64, 1, "part") < 0) goto e3;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e4;
    if (get(o_keep, &keep, K_BOOL, 1, "keep_out") < 0) goto e5;
    Py_ssize_t m = LEN(cands);
    if (count < 0 || count > LEN(groups) || count > LEN(tfs) || LEN(part) != m ||
        LEN(keep) < m) {
        range_error("count or lengths");
        goto done;
    }
    {
        const int32_t *g = (const int32_t *)groups.buf;
        const int32_t *c = (const int32_t *)cands.buf;
        const int32_t *ln = (const int32_t *)len.buf;
        double *p = (double *)part.buf;
        uint8_t *k = (uint8_t *)keep.buf;
        Py_ssize_t nlen = LEN(len), kept = 0, from = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            int32_t num = c[i];
            if (num < 0 || num >= nlen) {
                range_error("candidate");
                goto done;
            }
            /* The lower bound of num: beyond the last one when candidates ascend. */
            if (from == 0 || g[from - 1] < num) {
                from += lower_bound(g + from, count - from, num);
            } else {
                from = lower_bound(g, from, num);
            }
            if (from < count && g[from] == num) {
                double tf = tf_at(&tfs, from);
                p[i] = p[i] + wi * (tf / (tf + (a_part + b_part * (double)ln[num])));
            }
            int ok = p[i] * up + rest >= theta;
            k[i] = (uint8_t)ok;
            kept += ok;
        }
        result = PyLong_FromSsize_t(kept);
    }
done:
    PyBuffer_Release(&keep);
e5:
    PyBuffer_Release(&len);
e4:
    PyBuffer_Release(&part);
e3:
    PyBuffer_Release(&cands);
e2:
    PyBuffer_Release(&tfs);
e1:
    PyBuffer_Release(&groups);
    return result;
}

PyDoc_STRVAR(bm25_max_sat_doc,
"bm25_max_sat(groups, tfs, start, stop, lengths, a_part, kr) -> float\n\n"
"The largest tf / (tf + (a_part + kr * len[g])) over the postings start..stop\n"
"(0.0 for none). O(stop - start).");

static PyObject *
bm25_max_sat(PyObject *self, PyObject *args)
{
    PyObject *result = NULL;
    PyObject *o_groups, *o_tfs, *o_len;
    Py_ssize_t start, stop;
    double a_part, kr;
    if (!PyArg_ParseTuple(args, "OOnnOdd", &o_groups, &o_tfs, &start, &stop, &o_len, &a_part,
                          &kr)) {
        return NULL;
    }
    Py_buffer groups, tfs, len;
    if (get(o_groups, &groups, K_I32, 0, "groups") < 0) return NULL;
    if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) goto e1;
    if (get(o_len, &len, K_I32, 0, "lengths") < 0) goto e2;
    if (start < 0 || stop < start || stop > LEN(groups) || stop > LEN(tfs)) {
        range_error("start/stop");
        goto done;
    }
    {
        const int32_t *g = (const int32_t *)groups.buf;
        const int32_t *ln = (const int32_t *)len.buf;
        Py_ssize_t nlen = LEN(len);
        double top = 0.0;
        int any = 0;
        for (Py_ssize_t i = start; i < stop; i++) {
            int32_t num = g[i];
            if (num < 0 || num >= nlen) {
                range_error("group number");
                goto done;
            }
            double tf = tf_at(&tfs, i);
            double s = tf / (tf + (a_part + kr * (double)ln[num]));
            if (!any || s > top) {
                top = s;
                any = 1;
            }
        }
        result = PyFloat_FromDouble(top);
    }
done:
    PyBuffer_Release(&len);
e2:
    PyBuffer_Release(&tfs);
e1:
    PyBuffer_Release(&groups);
    return result;
}

PyDoc_STRVAR(bm25_keep_doc,
"bm25_keep(acc, nums, lo, hi, up, rest, theta, out) -> int\n\n"
"The group numbers g of nums[lo:hi] (intp) with acc[g] * up + rest >= theta, in\n"
"order, into out; returns how many. O(hi - lo).");

static PyObject *
bm25_keep(PyObject *self, PyObject *args)
{
    PyObject *o_acc, *o_nums, *o_out, *result = NULL;
    Py_ssize_t lo, hi;
    double up, rest, theta;
    if (!PyArg_ParseTuple(args, "OOnndddO", &o_acc, &o_nums, &lo, &hi, &up, &rest, &theta,
                          &o_out)) {
        return NULL;
    }
    Py_buffer acc, nums, out;
    if (get(o_acc, &acc, K_F64, 0, "acc") < 0) return NULL;
    if (get(o_nums, &nums, K_I64, 0, "nums") < 0) goto e1;
    if (get(o_out, &out, K_I64, 1, "out") < 0) goto e2;
    if (lo < 0 || hi < lo || hi > LEN(nums) || LEN(out) < hi - lo) {
        range_error("lo/hi");
        goto done;
    }
    {
        const double *a = (const double *)acc.buf;
        const int64_t *g = (const int64_t *)nums.buf;
        int64_t *o = (int64_t *)out.buf;
        Py_ssize_t k = 0, limit = LEN(acc);
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t num = g[i];
            if (num < 0 || num >= limit) {
                range_error("group number");
                goto done;
            }
            if (a[num] * up + rest >= theta) {
                o[k++] = num;
            }
        }
        result = PyLong_FromSsize_t(k);
    }
done:
    PyBuffer_Release(&out);
e2:
    PyBuffer_Release(&nums);
e1:
    PyBuffer_Release(&acc);
    return result;
}

typedef struct {
    Py_ssize_t pos;
    long tf;
} hit_t;

static int
by_pos(const void *a, const void *b)
{
    Py_ssize_t x = ((const hit_t *)a)->pos, y = ((const hit_t *)b)->pos;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(bm25_exact_doc,
"bm25_exact(terms, position, query, num, norm) -> float\n\n"
"BM25 of group num before weights: over its packed terms (term << 8 | min(tf, 255))\n"
"that have a position in the query, in the query's order, score += wi * (tf / (tf +\n"
"norm)), a capped tf looked up in the term's list (binary search). O(T log T).");

static PyObject *
bm25_exact(PyObject *self, PyObject *args)
{
    PyObject *o_terms, *position, *query;
    Py_ssize_t num;
    double norm;
    if (!PyArg_ParseTuple(args, "OO!O!nd", &o_terms, &PyDict_Type, &position, &PyList_Type,
                          &query, &num, &norm)) {
        return NULL;
    }
    Py_buffer terms;
    if (PyObject_GetBuffer(o_terms, &terms, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_SetString(PyExc_ValueError, "terms: not a contiguous buffer");
        return NULL;
    }
    char c = fmt_char(&terms);
    int wide = terms.itemsize == 8 && (c == 'q' || c == 'l');
    if (terms.ndim != 1 || !(wide || (terms.itemsize == 4 && c == 'i'))) {
        PyBuffer_Release(&terms);
        PyErr_SetString(PyExc_ValueError, "terms: not int32 or int64");
        return NULL;
    }
    if (check_aligned(&terms, "terms") < 0) {
        PyBuffer_Release(&terms);
        return NULL;
    }
    Py_ssize_t n = LEN(terms), nhits = 0, qlen = PyList_GET_SIZE(query);
    hit_t *hits = PyMem_Malloc((n ? n : 1) * sizeof(hit_t));
    PyObject *result = NULL;
    if (!hits) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long t = wide ? ((const int64_t *)terms.buf)[i] : ((const int32_t *)terms.buf)[i];
        PyObject *key = PyLong_FromLongLong(t >> 8);
        if (!key) goto done;
        PyObject *pos = PyDict_GetItemWithError(position, key);
        Py_DECREF(key);
        if (!pos) {
            if (PyErr_Occurred()) goto done;
            continue;
        }
        Py_ssize_t p = PyLong_AsSsize_t(pos);
        if (p == -1 && PyErr_Occurred()) goto done;
        if (p < 0 || p >= qlen) {
            range_error("query position");
            goto done;
        }
        hits[nhits].pos = p;
        hits[nhits].tf = (long)(t & 255);
        nhits++;
    }
    qsort(hits, nhits, sizeof(hit_t), by_pos);
    double score = 0.0;
    for (Py_ssize_t h = 0; h < nhits; h++) {
        PyObject *entry = PyList_GET_ITEM(query, hits[h].pos);
        double wi;
        PyObject *o_groups, *o_tfs;
        Py_ssize_t count;
        if (!PyTuple_Check(entry) ||
            !PyArg_ParseTuple(entry, "dOOn", &wi, &o_groups, &o_tfs, &count)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "query entries: tuples");
            goto done;
        }
        double tf = (double)hits[h].tf;
        if (hits[h].tf == 255) { /* capped: the exact frequency from the posting list */
            Py_buffer groups, tfs;
            if (get(o_groups, &groups, K_I32, 0, "groups") < 0) goto done;
            if (get(o_tfs, &tfs, K_TF, 0, "tfs") < 0) {
                PyBuffer_Release(&groups);
                goto done;
            }
            int ok = count >= 0 && count <= LEN(groups) && count <= LEN(tfs) && num >= 0;
            Py_ssize_t at = ok ? lower_bound((const int32_t *)groups.buf, count, (int32_t)num) : 0;
            ok = ok && at < count;
            if (ok) tf = tf_at(&tfs, at);
            PyBuffer_Release(&tfs);
            PyBuffer_Release(&groups);
            if (!ok) {
                range_error("group in its term's list");
                goto done;
            }
        }
        score += wi * (tf / (tf + norm));
    }
    result = PyFloat_FromDouble(score);
done:
    PyMem_Free(hits);
    PyBuffer_Release(&terms);
    return result;
}

/* ------------------------------------------------------------------ word overlap */

/* The counts array of wo_count_dense and wo_count_sparse (one-dimensional, C-contiguous,
 * writable and aligned, of uint8, uint16 or int64) held in *counts: its item size (1, 2
 * or 8), or 0 with ValueError set and nothing held. Inlined: wo_count_sparse is called
 * once per _JOIN group numbers, and a call costs as much as a short batch. */
static inline __attribute__((always_inline)) int
get_counts(PyObject *o_counts, Py_buffer *counts)
{
    if (PyObject_GetBuffer(o_counts, counts,
                           PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_SetString(PyExc_ValueError, "counts: not a contiguous writable buffer");
        return 0;
    }
    char c = fmt_char(counts);
    int width = counts->ndim == 1 && ((counts->itemsize == 1 && c == 'B') ||
                                      (counts->itemsize == 2 && c == 'H') ||
                                      (counts->itemsize == 8 && (c == 'q' || c == 'l')))
                    ? (int)counts->itemsize
                    : 0;
    if (!width) {
        PyBuffer_Release(counts);
        PyErr_SetString(PyExc_ValueError, "counts: not uint8, uint16 or int64");
        return 0;
    }
    if (check_aligned(counts, "counts") < 0) {
        PyBuffer_Release(counts);
        return 0;
    }
    return width;
}

/* counts[lo..hi) += m * set[lo..hi); counts of 1, 2 or 8 bytes. `restrict`: the two
 * never overlap (kernels.py passes distinct arrays), so the loops vectorise. */
#define DEFINE_ADD_DENSE(NAME, T)                                                    \
    static void NAME(T *restrict cnt, const uint8_t *restrict set, Py_ssize_t lo,    \
                     Py_ssize_t hi, T m)                                             \
    {                                                                                \
        if (m == 1) {                                                                \
            for (Py_ssize_t g = lo; g < hi; g++) cnt[g] += set[g];                   \
        } else {                                                                     \
            for (Py_ssize_t g = lo; g < hi; g++) cnt[g] += (T)(set[g] * m);          \
        }                                                                            \
    }
DEFINE_ADD_DENSE(add_dense_u8, uint8_t)
DEFINE_ADD_DENSE(add_dense_u16, uint16_t)
DEFINE_ADD_DENSE(add_dense_i64, int64_t)

#define ADD_DENSE(FN, T)                                                          \
    do {                                                                          \
        for (Py_ssize_t s = 0; s < nsets; s++) {                                  \
            FN((T *)counts.buf, (const uint8_t *)sets[s].buf, lo, hi, (T)mults[s]); \
        }                                                                         \
    } while (0)

PyDoc_STRVAR(wo_count_dense_doc,
"wo_count_dense(counts, lo, hi, sets, mults) -> None\n\n"
"counts[lo:hi] += m * set[lo:hi] for each byte set and multiplicity, in the counts'\n"
"own integer type (uint8, uint16 or int64, wrapping as numpy does).\n"
"O((hi - lo) * len(sets)).");

static PyObject *
wo_count_dense(PyObject *self, PyObject *args)
{
    PyObject *o_counts, *o_sets, *o_mults;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "OnnOO", &o_counts, &lo, &hi, &o_sets, &o_mults)) {
        return NULL;
    }
    if (!PyList_Check(o_sets) || !PyList_Check(o_mults) ||
        PyList_GET_SIZE(o_sets) != PyList_GET_SIZE(o_mults)) {
        PyErr_SetString(PyExc_ValueError, "sets and mults: lists of one length");
        return NULL;
    }
    Py_buffer counts;
    int width = get_counts(o_counts, &counts);
    if (!width) return NULL;
    if (lo < 0 || hi < lo || hi > LEN(counts)) {
        PyBuffer_Release(&counts);
        return range_error("lo/hi");
    }
    Py_ssize_t nsets = PyList_GET_SIZE(o_sets), got = 0;
    Py_buffer *sets = PyMem_Calloc(nsets ? nsets : 1, sizeof(Py_buffer));
    long *mults = PyMem_Calloc(nsets ? nsets : 1, sizeof(long));
    PyObject *result = NULL;
    if (!sets || !mults) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nsets; got++) {
        mults[got] = PyLong_AsLong(PyList_GET_ITEM(o_mults, got));
        if (mults[got] == -1 && PyErr_Occurred()) goto done;
        if (mults[got] < 0) {
            range_error("mult");
            goto done;
        }
        if (get(PyList_GET_ITEM(o_sets, got), &sets[got], K_U8, 0, "set") < 0) goto done;
        if (LEN(sets[got]) < hi) {
            got++;
            range_error("set length");
            goto done;
        }
    }
    for (Py_ssize_t s = 0; s < nsets; s++) {
        if (sets[s].buf == counts.buf) {
            PyErr_SetString(PyExc_ValueError, "a set is the counts array");
            goto done;
        }
    }
    if (width == 1) {
        ADD_DENSE(add_dense_u8, uint8_t);
    } else if (width == 2) {
        ADD_DENSE(add_dense_u16, uint16_t);
    } else {
        ADD_DENSE(add_dense_i64, int64_t);
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t s = 0; s < got; s++) PyBuffer_Release(&sets[s]);
    PyMem_Free(sets);
    PyMem_Free(mults);
    PyBuffer_Release(&counts);
    return result;
}

/* Add m to counts[g] once per distinct g < n of gids[lo..hi): with a mark array
 * (mark[g] == word: counted already), or as numpy's buffered counts[gids] += m. */
#define ADD_SPARSE(T)                                                        \
    do {                                                                     \
        T *cnt = (T *)counts.buf;                                            \
        T mm = (T)m;                                                         \
        if (mk) {                                                            \
            for (Py_ssize_t i = lo; i < hi; i++) {                           \
                int32_t g = gd[i];                                           \
                if (g < 0 || g >= n) continue;                               \
                if (mk[g] == w) continue;                                    \
                mk[g] = w;                                                   \
                cnt[g] += mm;                                                \
            }                                                                \
        } else {                                                             \
            T *tmp = PyMem_Malloc((hi - lo ? hi - lo : 1) * sizeof(T));      \
            if (!tmp) {                                                      \
                PyErr_NoMemory();                                            \
                goto done;                                                   \
            }                                                                \
            for (Py_ssize_t i = lo; i < hi; i++) {                           \
                int32_t g = gd[i];                                           \
                if (g >= 0 && g < n) tmp[i - lo] = (T)(cnt[g] + mm);         \
            }                                                                \
            for (Py_ssize_t i = lo; i < hi; i++) {                           \
                int32_t g = gd[i];                                           \
                if (g >= 0 && g < n) cnt[g] = tmp[i - lo];                   \
            }                                                                \
            PyMem_Free(tmp);                                                 \
        }                                                                    \
    } while (0)

PyDoc_STRVAR(wo_count_sparse_doc,
"wo_count_sparse(counts, gids, lo, hi, n, m, mark, word) -> None\n\n"
"counts[g] += m once for each distinct group number g < n among gids[lo:hi] (int32).\n"
"With mark (uint16, or None): mark[g] == word means counted already, and is set.\n"
"O(hi - lo).");

static PyObject *
wo_count_sparse(PyObject *self, PyObject *args)
{
    PyObject *o_counts, *o_gids, *o_mark;
    Py_ssize_t lo, hi, n;
    long m, word;
    if (!PyArg_ParseTuple(args, "OOnnnlOl", &o_counts, &o_gids, &lo, &hi, &n, &m, &o_mark,
                          &word)) {
        return NULL;
    }
    Py_buffer counts, gids, mark;
    int has_mark = o_mark != Py_None;
    int width = get_counts(o_counts, &counts);
    if (!width) return NULL;
    PyObject *result = NULL;
    if (get(o_gids, &gids, K_I32, 0, "gids") < 0) {
        PyBuffer_Release(&counts);
        return NULL;
    }
    if (has_mark && get(o_mark, &mark, K_U16, 1, "mark") < 0) {
        PyBuffer_Release(&gids);
        PyBuffer_Release(&counts);
        return NULL;
    }
    if (lo < 0 || hi < lo || hi > LEN(gids) || n < 0 || n > LEN(counts) ||
        (has_mark && n > LEN(mark)) || m < 0 || word < 0 || word > 65535) {
        range_error("lo/hi/n/m/word");
        goto done;
    }
    {
        const int32_t *gd = (const int32_t *)gids.buf;
        uint16_t *mk = has_mark ? (uint16_t *)mark.buf : NULL;
        uint16_t w = (uint16_t)word;
        if (width == 1) {
            ADD_SPARSE(uint8_t);
        } else if (width == 2) {
            ADD_SPARSE(uint16_t);
        } else {
            ADD_SPARSE(int64_t);
        }
    }
    result = Py_NewRef(Py_None);
done:
    if (has_mark) PyBuffer_Release(&mark);
    PyBuffer_Release(&gids);
    PyBuffer_Release(&counts);
    return result;
}

PyDoc_STRVAR(wo_scan_doc,
"wo_scan(recent, lo, hi, mod, word, rare=False, wide=False) -> list[int]\n\n"
"The group numbers g in lo..hi (at most mod of them: hi - lo <= mod, else ValueError\n"
"before any text is read) whose lower-cased text, recent[g % mod], contains\n"
"word (Python's `word in text`). With `rare`, a text and word of one byte per\n"
"character are searched by the word's rarest byte (memchr) and a compare at each of\n"
"its places; with `wide` too, a word of one byte per character in a text of two or\n"
"four bytes per character the same way, by the code units (SSE2 for two); any other\n"
"pair by PyUnicode_Find (the same answers). O(total length of those texts).");

/* How common a byte is in lower-cased English and JSON text, 0 (rare, or not listed)
 * to 255: wo_scan's `rare` search looks for the needle's least common byte. Any order
 * gives the same answers, only the number of places compared changes. */
static unsigned char byte_rank[256];

static void
byte_rank_init(void)
{
    static const char common[] = " etaoinsrhldcu\":,mfpgwyb._v-k/0123456789x=jqz";
    size_t n = sizeof common - 1;
    for (size_t i = 0; i < n; i++) byte_rank[(unsigned char)common[i]] = (unsigned char)(n - i);
}

/* The index in x[0:m] (m >= 1) of its least common byte by byte_rank (the first of
 * equal ones). */
static inline Py_ssize_t
rarest(const Py_UCS1 *x, Py_ssize_t m)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t j = 1; j < m; j++) {
        if (byte_rank[x[j]] < byte_rank[x[k]]) k = j;
    }
    return k;
}

/* Whether x[0:m] occurs in h[0:n] (bytes): memchr for x's least common byte (by
 * byte_rank; the first of equal ones), then the whole needle compared where it would
 * start. 1 or 0. */
static int
rare_search(const Py_UCS1 *h, Py_ssize_t n, const Py_UCS1 *x, Py_ssize_t m)
{
    if (m == 0) return 1;
    if (m > n) return 0;
    Py_ssize_t k = rarest(x, m);
    const Py_UCS1 c = x[k];
    const Py_UCS1 *p = h + k, *end = h + (n - m) + k + 1; /* x[k]'s places of a match */
    while (p < end) {
        p = memchr(p, c, (size_t)(end - p));
        if (!p) return 0;
        if (memcmp(p - k, x, (size_t)m) == 0) return 1;
        p++;
    }
    return 0;
}

/* Whether the code units h[0:m] (two or four bytes each, T) equal the bytes x[0:m]: the
 * same code points, as a one-byte str holds code points below 256. */
#define WIDE_EQ(T)                                                          \
    static inline int wide_eq_##T(const T *h, const Py_UCS1 *x, Py_ssize_t m) \
    {                                                                       \
        for (Py_ssize_t j = 0; j < m; j++) {                                \
            if (h[j] != (T)x[j]) return 0;                                  \
        }                                                                   \
        return 1;                                                           \
    }
WIDE_EQ(Py_UCS2)
WIDE_EQ(Py_UCS4)

/* rare_search of the one-byte needle x[0:m] in the two-byte code units h[0:n] (a str of
 * kind 2): the code unit equal to x's least common byte found 8 at a time (SSE2: a
 * compare and a byte mask per 16 bytes; one at a time elsewhere and for the tail), the
 * whole needle compared where it would start. 1 or 0. Reads only h[0:n]. */
static int
rare_search2(const Py_UCS2 *h, Py_ssize_t n, const Py_UCS1 *x, Py_ssize_t m)
{
    if (m == 0) return 1;
    if (m > n) return 0;
    Py_ssize_t k = rarest(x, m);
    const Py_UCS2 c = x[k];
    Py_ssize_t i = k;
    const Py_ssize_t end = n - m + k + 1; /* x[k]'s places of a match: i in [k, end) */
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i want = _mm_set1_epi16((short)c);
    for (; i + 8 <= end; i += 8) { /* end <= n, so h[i:i+8] is inside h */
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(h + i));
        unsigned bits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(v, want));
        while (bits) {
            int b = __builtin_ctz(bits); /* the low byte of a code unit equal to c */
            if (wide_eq_Py_UCS2(h + i + b / 2 - k, x, m)) return 1;
            bits &= ~(3u << b);
        }
    }
#endif
    for (; i < end; i++) {
        if (h[i] == c && wide_eq_Py_UCS2(h + i - k, x, m)) return 1;
    }
    return 0;
}

/* rare_search of the one-byte needle x[0:m] in the four-byte code units h[0:n] (a str
 * of kind 4), a code unit at a time. 1 or 0. */
static int
rare_search4(const Py_UCS4 *h, Py_ssize_t n, const Py_UCS1 *x, Py_ssize_t m)
{
    if (m == 0) return 1;
    if (m > n) return 0;
    Py_ssize_t k = rarest(x, m);
    const Py_UCS4 c = x[k];
    for (Py_ssize_t i = k, end = n - m + k + 1; i < end; i++) {
        if (h[i] == c && wide_eq_Py_UCS4(h + i - k, x, m)) return 1;
    }
    return 0;
}

/* Whether `text` (a str) contains `word` (a str): 1, 0, or -1 with an error set. `rare`
 * (the word is of kind 1): a text of kind 1 by rare_search; `wide` too: a text of kind 2
 * or 4 by rare_search2 / rare_search4; any other by PyUnicode_Find. */
static inline int
text_has(PyObject *text, PyObject *word, int rare, int wide)
{
    /* (A str not ready, Python 3.11's legacy kind 0, takes PyUnicode_Find.) */
    if (rare) {
        const int kind = PyUnicode_KIND(text);
        const Py_UCS1 *x = PyUnicode_1BYTE_DATA(word);
        const Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = PyUnicode_GET_LENGTH(word);
        if (kind == PyUnicode_1BYTE_KIND) return rare_search(PyUnicode_1BYTE_DATA(text), n, x, m);
        if (wide && kind == PyUnicode_2BYTE_KIND) {
            return rare_search2(PyUnicode_2BYTE_DATA(text), n, x, m);
        }
        if (wide && kind == PyUnicode_4BYTE_KIND) {
            return rare_search4(PyUnicode_4BYTE_DATA(text), n, x, m);
        }
    }
    Py_ssize_t at = PyUnicode_Find(text, word, 0, PY_SSIZE_T_MAX, 1);
    return at == -2 ? -1 : at >= 0;
}

/* wo_scan's and wo_scan_mark's checks, before any text is read: 0, or -1 with an
 * error set. lo:hi is at most mod groups wide: the texts are a ring of the mod newest
 * (group g's at g % mod), so a wider range would read a text again for a group that is
 * not its own, and a hi far beyond lo (2**62) would walk every group number of lo:hi
 * holding the GIL (a hang no signal interrupts). */
static int
scan_args_ok(PyObject *recent, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t mod)
{
    if (lo < 0 || hi < lo || mod <= 0 || mod > PyList_GET_SIZE(recent)) {
        range_error("lo/hi/mod");
        return -1;
    }
    if (hi - lo > mod) { /* hi >= lo >= 0: no overflow */
        PyErr_SetString(PyExc_ValueError, "hi beyond lo + mod (the texts)");
        return -1;
    }
    return 0;
}

static PyObject *
wo_scan(PyObject *self, PyObject *args)
{
    PyObject *recent, *word;
    Py_ssize_t lo, hi, mod;
    int rare = 0, wide = 0;
    if (!PyArg_ParseTuple(args, "O!nnnU|pp", &PyList_Type, &recent, &lo, &hi, &mod, &word,
                          &rare, &wide)) {
        return NULL;
    }
    rare = rare && PyUnicode_KIND(word) == PyUnicode_1BYTE_KIND;
    if (scan_args_ok(recent, lo, hi, mod) < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t g = lo; g < hi; g++) {
        PyObject *text = PyList_GET_ITEM(recent, g % mod);
        if (!PyUnicode_Check(text)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "recent texts must be str");
            return NULL;
        }
        int in = text_has(text, word, rare, wide);
        if (in < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (in) {
            PyObject *num = PyLong_FromSsize_t(g);
            if (!num || PyList_Append(out, num) < 0) {
                Py_XDECREF(num);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(num);
        }
    }
    return out;
}

PyDoc_STRVAR(wo_scan_mark_doc,
"wo_scan_mark(recent, lo, hi, mod, word, rare, wide, dense) -> int\n\n"
"wo_scan's groups set to 1 in `dense` (a writable 1-D contiguous uint8 buffer of at\n"
"least hi bytes), each in turn, and counted; no list made. dense's length and the\n"
"texts are checked first: a refused call writes nothing. O(total length of those texts).");

static PyObject *
wo_scan_mark(PyObject *self, PyObject *args)
{
    PyObject *recent, *word, *o_dense;
    Py_ssize_t lo, hi, mod;
    int rare = 0, wide = 0;
    if (!PyArg_ParseTuple(args, "O!nnnUppO", &PyList_Type, &recent, &lo, &hi, &mod, &word,
                          &rare, &wide, &o_dense)) {
        return NULL;
    }
    rare = rare && PyUnicode_KIND(word) == PyUnicode_1BYTE_KIND;
    if (scan_args_ok(recent, lo, hi, mod) < 0) return NULL;
    Py_buffer dense;
    if (get(o_dense, &dense, K_U8, 1, "dense") < 0) return NULL;
    PyObject *result = NULL;
    /* hi against dense before the texts: a hi far beyond it is refused at once, not
     * after a walk over every group number of lo:hi (2**62 steps for hi = 2**62). */
    if (hi > LEN(dense)) {
        range_error("hi beyond dense");
        goto done;
    }
    /* The texts read (at most mod of them, each once: scan_args_ok) checked before any
     * byte is written. */
    for (Py_ssize_t g = lo; g < hi; g++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(recent, g % mod))) {
            PyErr_SetString(PyExc_TypeError, "recent texts must be str");
            goto done;
        }
    }
    {
        uint8_t *d = (uint8_t *)dense.buf;
        Py_ssize_t found = 0;
        for (Py_ssize_t g = lo; g < hi; g++) {
            int in = text_has(PyList_GET_ITEM(recent, g % mod), word, rare, wide);
            if (in < 0) goto done;
            if (in) {
                d[g] = 1;
                found++;
            }
        }
        result = PyLong_FromSsize_t(found);
    }
done:
    PyBuffer_Release(&dense);
    return result;
}

PyDoc_STRVAR(wo_join_doc,
"wo_join(lists, n, ids, dense) -> int\n\n"
"The group numbers below n of the posting lists (array('i') each): written in order\n"
"to ids (int32) and counted, or, with dense (uint8) instead of ids, marked 1 there\n"
"(then 0 is returned). O(total postings).");

static PyObject *
wo_join(PyObject *self, PyObject *args)
{
    PyObject *lists, *o_ids, *o_dense;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!nOO", &PyList_Type, &lists, &n, &o_ids, &o_dense)) {
        return NULL;
    }
    int to_dense = o_dense != Py_None;
    if (to_dense == (o_ids != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "exactly one of ids and dense");
        return NULL;
    }
    Py_buffer out;
    if (get(to_dense ? o_dense : o_ids, &out, to_dense ? K_U8 : K_I32, 1, "out") < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t cap = LEN(out), k = 0;
    if (n < 0 || (to_dense && n > cap)) {
        range_error("n");
        goto done;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(lists); j++) {
        Py_buffer lst;
        if (get(PyList_GET_ITEM(lists, j), &lst, K_I32, 0, "posting list") < 0) goto done;
        const int32_t *g = (const int32_t *)lst.buf;
        Py_ssize_t len = LEN(lst);
        int full = 0;
        for (Py_ssize_t i = 0; i < len; i++) {
            int32_t num = g[i];
            if (num < 0 || num >= n) continue;
            if (to_dense) {
                ((uint8_t *)out.buf)[num] = 1;
            } else if (k < cap) {
                ((int32_t *)out.buf)[k++] = num;
            } else {
                full = 1;
                break;
            }
        }
        PyBuffer_Release(&lst);
        if (full) {
            range_error("ids capacity");
            goto done;
        }
    }
    result = PyLong_FromSsize_t(k);
done:
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------ collector */

PyDoc_STRVAR(gc_untrack_doc,
"gc_untrack(objs, cls)\n--\n\n"
"Take each object of the list objs, every one of exactly the type cls, out of the\n"
"cyclic garbage collector's lists: for values that can never be part of a reference\n"
"cycle (a stored MemoryEntry: an immutable tree of strs, tuples, numbers and times; a\n"
"record of an unbounded memory), which a full collection then no longer walks. An\n"
"object the collector does not track is left alone. Returns how many were tracked.\n"
"O(len(objs)). Raises TypeError, before untracking any, when objs is not exactly a\n"
"list, cls not a type, or an item not exactly of type cls.");

static PyObject *
gc_untrack(PyObject *self, PyObject *args)
{
    PyObject *objs, *cls;
    if (!PyArg_ParseTuple(args, "O!O!:gc_untrack", &PyList_Type, &objs, &PyType_Type, &cls))
        return NULL;
    if (!PyList_CheckExact(objs)) {
        PyErr_SetString(PyExc_TypeError, "gc_untrack: objs is not exactly a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(objs);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_TYPE(PyList_GET_ITEM(objs, i)) != (PyTypeObject *)cls) {
            PyErr_Format(PyExc_TypeError, "gc_untrack: objs[%zd] is not exactly of type cls", i);
            return NULL;
        }
    }
    /* Nothing below calls back into Python: the list cannot change under the loop. */
    Py_ssize_t was = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(objs, i);
        if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o)) {
            PyObject_GC_UnTrack(o);
            was++;
        }
    }
    return PyLong_FromSsize_t(was);
}

PyDoc_STRVAR(huge_advise_doc,
"huge_advise(buf, advice=MADV_HUGEPAGE)\n--\n\n"
"Ask the kernel for transparent huge pages on the whole 2 MiB pages inside the memory\n"
"of ``buf`` (any C-contiguous buffer: numpy array, array.array, bytearray): the range\n"
"is aligned inward. Returns the bytes advised, 0 when no whole huge page fits or madvise\n"
"refused (failures are ignored: a hint). ``advice`` is for tests (another madvise code).\n"
"O(1).");

static PyObject *
huge_advise_buf(PyObject *self, PyObject *args)
{
    PyObject *obj;
#ifdef MADV_HUGEPAGE
    int advice = MADV_HUGEPAGE;
#else
    int advice = 0;
#endif
    if (!PyArg_ParseTuple(args, "O|i:huge_advise", &obj, &advice)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0) return NULL;
    size_t done = huge_advise(view.buf, (size_t)view.len, advice);
    PyBuffer_Release(&view);
    return PyLong_FromSize_t(done);
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"bm25_accumulate", bm25_accumulate, METH_VARARGS, bm25_accumulate_doc},
    {"bm25_refine", bm25_refine, METH_VARARGS, bm25_refine_doc},
    {"bm25_max_sat", bm25_max_sat, METH_VARARGS, bm25_max_sat_doc},
    {"bm25_exact", bm25_exact, METH_VARARGS, bm25_exact_doc},
    {"bm25_keep", bm25_keep, METH_VARARGS, bm25_keep_doc},
    {"wo_count_dense", wo_count_dense, METH_VARARGS, wo_count_dense_doc},
    {"wo_count_sparse", wo_count_sparse, METH_VARARGS, wo_count_sparse_doc},
    {"wo_scan", wo_scan, METH_VARARGS, wo_scan_doc},
    {"wo_scan_mark", wo_scan_mark, METH_VARARGS, wo_scan_mark_doc},
    {"wo_join", wo_join, METH_VARARGS, wo_join_doc},
    {"gc_untrack", gc_untrack, METH_VARARGS, gc_untrack_doc},
    {"huge_advise", huge_advise_buf, METH_VARARGS, huge_advise_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "actormem._index._ckernels",
    .m_doc = "Compiled kernels of the scoring indexes (see actormem/_index/kernels.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__ckernels(void)
{
    byte_rank_init();
    return PyModule_Create(&module);
}
