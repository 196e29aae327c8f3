/* The word-overlap index's core in C (optional: actormem/_index/wordoverlap/ccore.py
 * checks the arguments and falls back to the pure-Python index, the reference, when
 * this module is not built or ACTORMEM_WO_CORE=0).
 *
 * Two functions over the index's own Python structures (the posting dict of
 * array('i'), the substring vocabulary's dicts), doing exactly what the Python code
 * does, without the interpreter:
 *
 *   add_text     the owner's add of a new distinct text: its token set, one posting
 *                append per token, and for a new token the vocabulary's acquire
 *                (SubstringVocab.acquire: gram keys, gram lists, the 1/2-character
 *                index of 3-grams);
 *   count_words  a reader's word loop for the query words whose match set is small
 *                (fewer postings than the cache threshold): vocabulary lookup (the
 *                gram list, candidates verified with `word in token`), posting lists,
 *                distinct group numbers below n, counts += multiplicity. It stops after
 *                a work budget and hands back the words it leaves to Python (short
 *                words, cached words, words with large candidate or posting lists).
 *
 * Neither runs Python code (only dict, set, list, str and array operations on exact
 * built-in types, checked), so the structures cannot change during a call; borrowed
 * references stay valid within it. Every call is bounded by its arguments or budget.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kernels_common.h"

static PyObject *array_type;   /* array.array */
static PyObject *array_append; /* array.array.append (a method descriptor) */

static int
check_dict(PyObject *o, const char *name)
{
    if (!PyDict_CheckExact(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict", name);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ vocabulary */

/* The vocabulary's dicts and counter, read from a SubstringVocab once per call. */
struct vocab {
    PyObject *obj, *ids, *items, *refs, *grams, *sub, *active;
};

static void
vocab_release(struct vocab *v)
{
    Py_CLEAR(v->ids);
    Py_CLEAR(v->items);
    Py_CLEAR(v->refs);
    Py_CLEAR(v->grams);
    Py_CLEAR(v->sub);
    Py_CLEAR(v->active);
}

static int
vocab_load(PyObject *obj, struct vocab *v)
{
    memset(v, 0, sizeof(*v));
    v->obj = obj;
    static const char *names[] = {"_ids", "_items", "_refs", "_grams", "_sub"};
    PyObject **slots[] = {&v->ids, &v->items, &v->refs, &v->grams, &v->sub};
    for (int i = 0; i < 5; i++) {
        PyObject *d = PyObject_GetAttrString(obj, names[i]);
        if (!d) goto fail;
        *slots[i] = d;
        if (check_dict(d, names[i]) < 0) goto fail;
    }
    v->active = PyObject_GetAttrString(obj, "_active");
    if (!v->active) goto fail;
    if (!PySet_CheckExact(v->active)) {
        PyErr_SetString(PyExc_TypeError, "_active must be a set");
        goto fail;
    }
    return 0;
fail:
    vocab_release(v);
    return -1;
}


/* Add `sub` (a new reference, stolen) to `set`. */
static int
set_add_steal(PyObject *set, PyObject *sub)
{
    if (!sub) return -1;
    int r = PySet_Add(set, sub);
    Py_DECREF(sub);
    return r;
}

/* SubstringVocab._keys(item): grams_of(item) plus the active 1/2-character words in
 * it. A new set. */
static PyObject *
vocab_keys(struct vocab *v, PyObject *item)
{
    PyObject *keys = PySet_New(NULL);
    if (!keys) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(item);
    if (n <= 2) {
        if (PySet_Add(keys, item) < 0) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (set_add_steal(keys, PyUnicode_Substring(item, i, i + 1)) < 0) goto fail;
        }
        return keys;
    }
    for (Py_ssize_t i = 0; i + 3 <= n; i++) {
        if (set_add_steal(keys, PyUnicode_Substring(item, i, i + 3)) < 0) goto fail;
    }
    if (PySet_GET_SIZE(v->active)) {
        for (Py_ssize_t width = 1; width <= 2; width++) {
            for (Py_ssize_t i = 0; i + width <= n; i++) {
                PyObject *s = PyUnicode_Substring(item, i, i + width);
                if (!s) goto fail;
                int in = PySet_Contains(v->active, s);
                int r = in > 0 ? PySet_Add(keys, s) : in;
                Py_DECREF(s);
                if (r < 0) goto fail;
            }
        }
    }
    return keys;
fail:
    Py_DECREF(keys);
    return NULL;
}

/* SubstringVocab.acquire(item), the return value dropped. */
static int
vocab_acquire(struct vocab *v, PyObject *item)
{
    PyObject *iid = PyDict_GetItemWithError(v->ids, item); /* borrowed */
    if (iid) {
        PyObject *old = PyDict_GetItemWithError(v->refs, iid);
        if (!old && PyErr_Occurred()) return -1;
        long count = old ? PyLong_AsLong(old) : 1;
        if (count == -1 && PyErr_Occurred()) return -1;
        PyObject *now = PyLong_FromLong(count + 1);
        if (!now) return -1;
        int r = PyDict_SetItem(v->refs, iid, now);
        Py_DECREF(now);
        return r;
    }
    if (PyErr_Occurred()) return -1;
    PyObject *next = PyObject_GetAttrString(v->obj, "_next_id");
    if (!next) return -1;
    if (!PyLong_CheckExact(next)) {
        Py_DECREF(next);
        PyErr_SetString(PyExc_TypeError, "_next_id must be an int");
        return -1;
    }
    PyObject *one = PyLong_FromLong(1);
    PyObject *after = one ? PyNumber_Add(next, one) : NULL;
    Py_XDECREF(one);
    int r = -1;
    PyObject *keys = NULL, *it = NULL;
    if (!after || PyObject_SetAttrString(v->obj, "_next_id", after) < 0) goto done;
    if (PyDict_SetItem(v->ids, item, next) < 0 || PyDict_SetItem(v->items, next, item) < 0) {
        goto done;
    }
    keys = vocab_keys(v, item);
    if (!keys) goto done;
    it = PyObject_GetIter(keys);
    if (!it) goto done;
    PyObject *g;
    for (; (g = PyIter_Next(it)) != NULL; Py_DECREF(g)) {
        PyObject *lst = PyDict_GetItemWithError(v->grams, g);
        if (lst) {
            if (!PyList_CheckExact(lst)) {
                PyErr_SetString(PyExc_TypeError, "gram lists must be lists");
                goto fail_g;
            }
            if (PyList_Append(lst, next) < 0) goto fail_g;
            continue;
        }
        if (PyErr_Occurred()) goto fail_g;
        PyObject *fresh = PyList_New(1);
        if (!fresh) goto fail_g;
        Py_INCREF(next);
        PyList_SET_ITEM(fresh, 0, next);
        int s = PyDict_SetItem(v->grams, g, fresh);
        Py_DECREF(fresh);
        if (s < 0) goto fail_g;
        if (PyUnicode_GET_LENGTH(g) != 3) continue;
        /* _parts(g): g[:2], g[1:], and its characters, each indexed to g. */
        PyObject *parts[5] = {
            PyUnicode_Substring(g, 0, 2), PyUnicode_Substring(g, 1, 3),
            PyUnicode_Substring(g, 0, 1), PyUnicode_Substring(g, 1, 2),
            PyUnicode_Substring(g, 2, 3),
        };
        int bad = 0;
        for (int k = 0; k < 5; k++) {
            if (bad || !parts[k]) {
                bad = 1;
                continue;
            }
            PyObject *set = PyDict_GetItemWithError(v->sub, parts[k]);
            if (set) {
                if (!PySet_CheckExact(set) || PySet_Add(set, g) < 0) bad = 1;
            } else if (PyErr_Occurred()) {
                bad = 1;
            } else {
                PyObject *one_set = PySet_New(NULL);
                if (!one_set || PySet_Add(one_set, g) < 0 ||
                    PyDict_SetItem(v->sub, parts[k], one_set) < 0) {
                    bad = 1;
                }
                Py_XDECREF(one_set);
            }
        }
        for (int k = 0; k < 5; k++) Py_XDECREF(parts[k]);
        if (bad) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "_sub values must be sets");
            }
            goto fail_g;
        }
    }
    if (!PyErr_Occurred()) r = 0;
    goto done;
fail_g:
    Py_DECREF(g);
done:
    Py_XDECREF(it);
    Py_XDECREF(keys);
    Py_XDECREF(after);
    Py_DECREF(next);
    return r;
}

/* ------------------------------------------------------------------ add */

/* One token of add_text: the append, or the acquire and a new list. 0, or -1 with an
 * error set. */
static int
add_token(PyObject *post, PyObject *tok, PyObject *num, PyObject *vocab_obj, struct vocab *v,
          int *loaded, Py_ssize_t *fresh)
{
    PyObject *lst = PyDict_GetItemWithError(post, tok);
    if (lst) {
        if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
            PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
            return -1;
        }
        PyObject *r = PyObject_CallFunctionObjArgs(array_append, lst, num, NULL);
        if (!r) return -1;
        Py_DECREF(r);
        return 0;
    }
    if (PyErr_Occurred()) return -1;
    if (!*loaded) {
        if (vocab_load(vocab_obj, v) < 0) return -1;
        *loaded = 1;
    }
    if (vocab_acquire(v, tok) < 0) return -1;
    PyObject *one = PyObject_CallFunction(array_type, "s(O)", "i", num);
    if (!one) return -1;
    int s = PyDict_SetItem(post, tok, one);
    Py_DECREF(one);
    if (s < 0) return -1;
    (*fresh)++;
    return 0;
}

PyDoc_STRVAR(add_text_doc,
"add_text(post, low, gid, vocab) -> int\n\n"
"Index the lower-cased text `low` under the new group number `gid`: for each distinct\n"
"token of low.split(), gid appended to its posting list post[token] (an array('i')),\n"
"or, for a new token, vocab.acquire(token) and post[token] = array('i', [gid]).\n"
"Returns the number of new tokens. O(tokens), plus O(len(token)) per new token.");

static PyObject *
add_text(PyObject *self, PyObject *args)
{
    PyObject *post, *low, *vocab_obj;
    long gid;
    if (!PyArg_ParseTuple(args, "O!UlO", &PyDict_Type, &post, &low, &gid, &vocab_obj)) {
        return NULL;
    }
    if (!PyDict_CheckExact(post) || !PyUnicode_CheckExact(low)) {
        PyErr_SetString(PyExc_TypeError, "post must be a dict and low a str");
        return NULL;
    }
    if (gid < 0 || gid > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "gid out of range");
        return NULL;
    }
    PyObject *words = PyUnicode_Split(low, NULL, -1);
    if (!words) return NULL;
    PyObject *toks = PySet_New(words);
    Py_DECREF(words);
    if (!toks) return NULL;
    PyObject *num = PyLong_FromLong(gid);
    PyObject *result = NULL;
    struct vocab v;
    int loaded = 0;
    Py_ssize_t fresh = 0;
    if (!num) goto done;
    PyObject *it = PyObject_GetIter(toks);
    if (!it) goto done;
    PyObject *tok;
    while ((tok = PyIter_Next(it)) != NULL) {
        int ok = add_token(post, tok, num, vocab_obj, &v, &loaded, &fresh);
        Py_DECREF(tok);
        if (ok < 0) break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto done;
    result = PyLong_FromSsize_t(fresh);
done:
    if (loaded) vocab_release(&v);
    Py_XDECREF(num);
    Py_DECREF(toks);
    return result;
}

/* ------------------------------------------------------------------ query words */

/* The distinct numbers of buf[0:k] (each in [0, 2^31)) moved to its front, in their
 * first order; returns how many. `table` has room for `cap` numbers (a power of two
 * >= 2k). O(k + cap). */
static Py_ssize_t
distinct(int32_t *buf, Py_ssize_t k, int32_t *table, size_t cap)
{
    memset(table, 0xFF, cap * sizeof(int32_t)); /* -1: empty */
    size_t mask = cap - 1;
    Py_ssize_t out = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        int32_t g = buf[j];
        size_t h = ((uint32_t)g * 2654435761u) & mask;
        while (table[h] != -1 && table[h] != g) h = (h + 1) & mask;
        if (table[h] == -1) {
            table[h] = g;
            buf[out++] = g;
        }
    }
    return out;
}

/* The candidate ids of `w` (len >= 4): the shortest of up to 8 of its 3-gram lists,
 * spread over the word (SubstringVocab._candidates; any choice is exact, as every
 * candidate is verified). Borrowed, or NULL with *absent = 1 when a gram is missing
 * (nothing contains w), or NULL with an error set. */
static PyObject *
candidates(PyObject *grams, PyObject *w, int *absent)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(w) - 2;
    Py_ssize_t probes = n <= 8 ? n : 8;
    PyObject *best = NULL;
    *absent = 0;
    for (Py_ssize_t k = 0; k < probes; k++) {
        Py_ssize_t i = n <= 8 ? k : (Py_ssize_t)((double)k * (double)(n - 1) / 7.0 + 0.5);
        if (i > n - 1) i = n - 1;
        PyObject *g = PyUnicode_Substring(w, i, i + 3);
        if (!g) return NULL;
        PyObject *lst = PyDict_GetItemWithError(grams, g);
        Py_DECREF(g);
        if (!lst) {
            if (!PyErr_Occurred()) *absent = 1;
            return NULL;
        }
        if (!PyList_CheckExact(lst)) {
            PyErr_SetString(PyExc_TypeError, "gram lists must be lists");
            return NULL;
        }
        if (!best || PyList_GET_SIZE(lst) < PyList_GET_SIZE(best)) best = lst;
    }
    return best;
}

/* The ids of the tokens that contain `w` (4 or more characters), by the vocabulary's
 * long-word cache as SubstringVocab.lookup_steps keeps it: a cached answer for the same
 * candidate list is reused, its new tail verified, and the answer remembered (the
 * oldest word dropped beyond `cache_size`). A new reference; or NULL with *absent set
 * (nothing contains w), *big set (more than `limit` candidates to verify), or an error.
 * Adds the candidates verified to *work. */
static PyObject *
long_word_ids(PyObject *grams, PyObject *items, PyObject *cache, Py_ssize_t cache_size,
              PyObject *w, Py_ssize_t limit, int *absent, int *big, Py_ssize_t *work)
{
    PyObject *best = candidates(grams, w, absent);
    if (!best) return NULL;
    Py_ssize_t end = PyList_GET_SIZE(best), scanned = 0;
    PyObject *old = NULL;
    PyObject *hit = PyDict_GetItemWithError(cache, w);
    if (!hit && PyErr_Occurred()) return NULL;
    if (hit && PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 3 &&
        PyTuple_GET_ITEM(hit, 0) == best) {
        scanned = PyLong_AsSsize_t(PyTuple_GET_ITEM(hit, 1));
        if (scanned == -1 && PyErr_Occurred()) return NULL;
        old = PyTuple_GET_ITEM(hit, 2);
        if (!PyList_CheckExact(old) || scanned < 0 || scanned > end) {
            PyErr_SetString(PyExc_ValueError, "a malformed long-word cache entry");
            return NULL;
        }
        if (scanned == end) return Py_NewRef(old);
    }
    if (end - scanned > limit || (old && PyList_GET_SIZE(old) > limit)) {
        *big = 1; /* left to Python (bounded steps), not copied here */
        return NULL;
    }
    /* A copy: other readers may hold the cached list. */
    PyObject *found = old ? PyList_GetSlice(old, 0, PY_SSIZE_T_MAX) : PyList_New(0);
    if (!found) return NULL;
    *work += end - scanned;
    for (Py_ssize_t j = scanned; j < end; j++) {
        PyObject *id = PyList_GET_ITEM(best, j);
        PyObject *item = PyDict_GetItemWithError(items, id);
        if (!item) {
            if (PyErr_Occurred()) goto fail;
            continue; /* removed since */
        }
        if (!PyUnicode_CheckExact(item)) {
            PyErr_SetString(PyExc_TypeError, "vocabulary items must be str");
            goto fail;
        }
        Py_ssize_t at = PyUnicode_Find(item, w, 0, PY_SSIZE_T_MAX, 1);
        if (at == -2 || (at >= 0 && PyList_Append(found, id) < 0)) goto fail;
    }
    int in = PyDict_Contains(cache, w);
    if (in < 0) goto fail;
    if (!in && PyDict_GET_SIZE(cache) >= cache_size) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        if (PyDict_Next(cache, &pos, &key, &value)) { /* the oldest first */
            Py_INCREF(key);
            int r = PyDict_DelItem(cache, key);
            Py_DECREF(key);
            if (r < 0) goto fail;
        }
    }
    PyObject *entry = Py_BuildValue("(OnO)", best, end, found);
    if (!entry) goto fail;
    int r = PyDict_SetItem(cache, w, entry);
    Py_DECREF(entry);
    if (r < 0) goto fail;
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

PyDoc_STRVAR(count_words_doc,
"count_words(words, mults, start, budget, limit, grams, items, cache, cache_size,\n"
"            post, skip, short, counts, n) -> (int, list[int])\n\n"
"From words[start:] (distinct lower-cased query words, mults their multiplicities):\n"
"for each word of 3 or more characters that is not in `short` (a dict) nor in `skip`\n"
"(a dict: the cached match sets), whose candidate tokens (from the vocabulary's gram\n"
"dict `grams`, item dict `items` and long-word cache `cache`, kept as\n"
"SubstringVocab.lookup_steps keeps it) number at most `limit` and whose lists in\n"
"`post` hold fewer than `limit` group numbers in all, counts[g] += mult once for every\n"
"distinct group number g < n of those lists. Every other word is left to the caller.\n"
"Stops after the word at which the work (candidates + postings + 1 per word) reaches\n"
"`budget`. Returns (the index of the next word, the indexes of the words left).\n"
"O(budget + limit).");

#define ADD_COUNTS(T)                                                        \
    do {                                                                     \
        T *c = (T *)counts.buf;                                              \
        T add = (T)m;                                                        \
        for (Py_ssize_t j = 0; j < k; j++) {                                 \
            c[buf[j]] += add;                                                \
        }                                                                    \
    } while (0)

static PyObject *
count_words(PyObject *self, PyObject *args)
{
    PyObject *words, *mults, *grams, *items, *vcache, *post, *skip, *shorts, *o_counts;
    Py_ssize_t start, budget, limit, cache_size, n;
    if (!PyArg_ParseTuple(args, "O!O!nnnO!O!O!nO!O!O!On", &PyList_Type, &words, &PyList_Type,
                          &mults, &start, &budget, &limit, &PyDict_Type, &grams, &PyDict_Type,
                          &items, &PyDict_Type, &vcache, &cache_size, &PyDict_Type, &post,
                          &PyDict_Type, &skip, &PyDict_Type, &shorts, &o_counts, &n)) {
        return NULL;
    }
    if (!PyDict_CheckExact(grams) || !PyDict_CheckExact(items) || !PyDict_CheckExact(vcache) ||
        !PyDict_CheckExact(post) || !PyDict_CheckExact(skip) || !PyDict_CheckExact(shorts) ||
        cache_size < 1) {
        PyErr_SetString(PyExc_TypeError, "exact dicts and a cache size >= 1 expected");
        return NULL;
    }
    Py_ssize_t nw = PyList_GET_SIZE(words);
    if (PyList_GET_SIZE(mults) != nw || start < 0 || start > nw || limit < 0 || budget < 0) {
        PyErr_SetString(PyExc_ValueError, "words/mults/start/limit/budget out of range");
        return NULL;
    }
    Py_buffer counts;
    if (PyObject_GetBuffer(o_counts, &counts,
                           PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_SetString(PyExc_ValueError, "counts: not a contiguous writable buffer");
        return NULL;
    }
    int width = counts.ndim == 1 && (kind_ok(&counts, K_U8) || kind_ok(&counts, K_U16) ||
                                     kind_ok(&counts, K_I64))
                    ? (int)counts.itemsize
                    : 0;
    PyObject *left = NULL, *result = NULL;
    PyObject **lists = NULL;
    int32_t *buf = NULL, *table = NULL;
    if (!width) {
        PyErr_SetString(PyExc_ValueError, "counts: not uint8, uint16 or int64");
        goto done;
    }
    if (n < 0 || n > LEN(counts)) {
        PyErr_SetString(PyExc_ValueError, "n beyond counts");
        goto done;
    }
    left = PyList_New(0);
    lists = PyMem_Malloc(sizeof(PyObject *) * (size_t)(limit + 1));
    buf = PyMem_Malloc(sizeof(int32_t) * (size_t)(limit + 1));
    size_t cap = 16;
    while (cap < 2 * (size_t)limit) cap *= 2;
    table = PyMem_Malloc(sizeof(int32_t) * cap);
    if (!left || !lists || !buf || !table) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = start, work = 0;
    for (; i < nw && work < budget; i++) {
        PyObject *w = PyList_GET_ITEM(words, i);
        PyObject *mo = PyList_GET_ITEM(mults, i);
        if (!PyUnicode_CheckExact(w) || !PyLong_CheckExact(mo)) {
            PyErr_SetString(PyExc_TypeError, "words must be str and mults int");
            goto done;
        }
        long m = PyLong_AsLong(mo);
        if (m == -1 && PyErr_Occurred()) goto done;
        if (m < 0 || m > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a multiplicity out of range");
            goto done;
        }
        work++;
        Py_ssize_t wlen = PyUnicode_GET_LENGTH(w);
        int leave = wlen <= 2;
        if (!leave) {
            int in = PyDict_Contains(shorts, w);
            if (in == 0) in = PyDict_Contains(skip, w);
            if (in < 0) goto done;
            leave = in;
        }
        PyObject *ids = NULL; /* owned: the tokens containing w */
        if (!leave) {
            int absent = 0, big = 0;
            if (wlen == 3) {
                ids = PyDict_GetItemWithError(grams, w);
                if (!ids && PyErr_Occurred()) goto done;
                if (ids && !PyList_CheckExact(ids)) {
                    PyErr_SetString(PyExc_TypeError, "gram lists must be lists");
                    goto done;
                }
                Py_XINCREF(ids);
                absent = ids == NULL;
            } else {
                ids = long_word_ids(grams, items, vcache, cache_size, w, limit, &absent, &big,
                                    &work);
                if (!ids && !absent && !big) goto done;
            }
            if (absent) continue; /* no token contains w */
            leave = big || PyList_GET_SIZE(ids) > limit;
        }
        Py_ssize_t nl = 0, total = 0;
        if (!leave) {
            Py_ssize_t nc = PyList_GET_SIZE(ids);
            work += nc;
            for (Py_ssize_t j = 0; j < nc && !leave; j++) {
                PyObject *item = PyDict_GetItemWithError(items, PyList_GET_ITEM(ids, j));
                if (item && !PyUnicode_CheckExact(item)) {
                    Py_DECREF(ids);
                    PyErr_SetString(PyExc_TypeError, "vocabulary items must be str");
                    goto done;
                }
                PyObject *lst = item ? PyDict_GetItemWithError(post, item) : NULL;
                if (!lst) {
                    if (PyErr_Occurred()) {
                        Py_DECREF(ids);
                        goto done;
                    }
                    continue; /* removed since */
                }
                Py_ssize_t len = Py_TYPE(lst) == (PyTypeObject *)array_type
                                     ? PyObject_Length(lst)
                                     : -1;
                if (len < 0) {
                    Py_DECREF(ids);
                    if (!PyErr_Occurred()) {
                        PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
                    }
                    goto done;
                }
                total += len;
                if (total >= limit) {
                    leave = 1;
                } else {
                    lists[nl++] = lst;
                }
            }
        }
        Py_XDECREF(ids);
        if (leave) {
            PyObject *num = PyLong_FromSsize_t(i);
            if (!num || PyList_Append(left, num) < 0) {
                Py_XDECREF(num);
                goto done;
            }
            Py_DECREF(num);
            continue;
        }
        work += total;
        Py_ssize_t k = 0;
        for (Py_ssize_t j = 0; j < nl; j++) {
            Py_buffer lb;
            if (PyObject_GetBuffer(lists[j], &lb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
                goto done;
            }
            const char *lf = lb.format ? lb.format : "B";
            if (lb.ndim != 1 || lb.itemsize != 4 || (lf[0] != 'i' && lf[0] != 'l') ||
                lf[1] != '\0') {
                PyBuffer_Release(&lb);
                PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
                goto done;
            }
            const int32_t *g = (const int32_t *)lb.buf;
            Py_ssize_t len = lb.len / 4;
            for (Py_ssize_t q = 0; q < len && k < limit; q++) {
                if (g[q] >= 0 && g[q] < n) buf[k++] = g[q];
            }
            PyBuffer_Release(&lb);
        }
        if (nl > 1) { /* one list holds distinct numbers; several may share some */
            size_t size = 16;
            while (size < 2 * (size_t)k) size *= 2;
            k = distinct(buf, k, table, size <= cap ? size : cap);
        }
        if (width == 1) {
            ADD_COUNTS(uint8_t);
        } else if (width == 2) {
            ADD_COUNTS(uint16_t);
        } else {
            ADD_COUNTS(int64_t);
        }
    }
    result = Py_BuildValue("nO", i, left);
done:
    PyMem_Free(table);
    PyMem_Free(buf);
    PyMem_Free(lists);
    Py_XDECREF(left);
    PyBuffer_Release(&counts);
    return result;
}

/* ------------------------------------------------------------------ masks */

PyDoc_STRVAR(text_masks_doc,
"text_masks(texts, pair_lo, pair_hi, lo, hi, start) -> None\n\n"
"For each lower-cased text j of `texts`: lo[start + j] and hi[start + j] = the OR of\n"
"pair_lo / pair_hi (uint64, 129 * 129) at a * 129 + b over the text's character pairs\n"
"(a, b), the last character paired with a newline; code points above 127 count as 128.\n"
"What masks._text_masks computes with numpy. O(total length).");

static PyObject *
text_masks(PyObject *self, PyObject *args)
{
    PyObject *texts, *o_plo, *o_phi, *o_lo, *o_hi;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!OOOOn", &PyList_Type, &texts, &o_plo, &o_phi, &o_lo, &o_hi,
                          &start)) {
        return NULL;
    }
    Py_buffer b[4];
    PyObject *objs[4] = {o_plo, o_phi, o_lo, o_hi};
    int got = 0;
    PyObject *result = NULL;
    for (; got < 4; got++) {
        int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (got >= 2 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(objs[got], &b[got], flags) < 0) goto done;
        if (b[got].ndim != 1 || !kind_ok(&b[got], K_U64)) {
            got++;
            PyErr_SetString(PyExc_ValueError, "masks and tables must be 1-D uint64");
            goto done;
        }
    }
    Py_ssize_t nt = PyList_GET_SIZE(texts);
    if (b[0].len / 8 != 129 * 129 || b[1].len / 8 != 129 * 129 || start < 0 ||
        start + nt > b[2].len / 8 || start + nt > b[3].len / 8) {
        PyErr_SetString(PyExc_ValueError, "tables not 129 * 129, or start beyond the masks");
        goto done;
    }
    const uint64_t *plo = b[0].buf, *phi = b[1].buf;
    uint64_t *lo = b[2].buf, *hi = b[3].buf;
    for (Py_ssize_t j = 0; j < nt; j++) {
        PyObject *t = PyList_GET_ITEM(texts, j);
        if (!PyUnicode_CheckExact(t)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto done;
        }
        int kind = PyUnicode_KIND(t);
        const void *data = PyUnicode_DATA(t);
        Py_ssize_t len = PyUnicode_GET_LENGTH(t);
        uint64_t ml = 0, mh = 0;
        Py_UCS4 prev = len ? PyUnicode_READ(kind, data, 0) : 0;
        unsigned a = prev > 128 ? 128 : prev;
        for (Py_ssize_t i = 1; i <= len; i++) {
            Py_UCS4 c = i < len ? PyUnicode_READ(kind, data, i) : '\n';
            unsigned z = c > 128 ? 128 : c;
            ml |= plo[a * 129 + z];
            mh |= phi[a * 129 + z];
            a = z;
        }
        lo[start + j] = ml;
        hi[start + j] = mh;
    }
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"add_text", add_text, METH_VARARGS, add_text_doc},
    {"count_words", count_words, METH_VARARGS, count_words_doc},
    {"text_masks", text_masks, METH_VARARGS, text_masks_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "actormem._index._cwordoverlap",
    .m_doc = "The word-overlap index's core in C (see actormem/_index/wordoverlap/ccore.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cwordoverlap(void)
{
    array_type = import_array_type();
    if (!array_type) return NULL;
    array_append = PyObject_GetAttrString(array_type, "append");
    if (!array_append) return NULL;
    return PyModule_Create(&module);
}
