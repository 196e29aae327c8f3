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
#include <datetime.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "_kernels_common.h"
#include "_foldhash.h"
#include "_duptable.h"
#include "_entrycols.h" /* before the tables: IdTable and GroupTable read its slots */
#include "_idtable.h"
#include "_grouptable.h"

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
/* The active words of 1 or 2 ASCII characters as bits, built from a vocabulary's
 * `_active` set at the first ASCII item that needs them, and kept (in the token cache)
 * while that set is the same object of the same size: _active only grows
 * (SubstringVocab.lookup adds to it, nothing removes), and only Python code changes it,
 * none of which runs during a call. Bit c for the word chr(c), bit 128 + (a << 7 | b)
 * for chr(a) + chr(b). Rebuilt per text (O(len(_active))) they cost more than they
 * save once _active holds a few hundred words. */
struct active_bits {
    PyObject *set;  /* the _active they were built from (held: its id is not reused) */
    Py_ssize_t len; /* its size then */
    int state;      /* 1 usable, 2 not usable (a key that is not an exact str: its own
                     * __eq__ may match other strs) */
    uint64_t bits[(128 + 128 * 128) / 64];
};

/* Builds of active_bits (tests: built again only when _active changed). */
static Py_ssize_t active_bits_builds;

struct vocab {
    PyObject *obj, *ids, *items, *refs, *grams, *sub, *active;
    /* New gram lists and _sub sets are untracked by the cyclic collector (they only
     * ever hold ints and strs: no cycle can pass through them). Set by the caller
     * after vocab_load (ADD_UNTRACK). */
    int untrack;
    /* ADD_ACTIVE_BITS, set by the caller after vocab_load: the active words' bits
     * (struct active_bits), kept in the token cache across calls; NULL: knob off. */
    struct active_bits *ab;
    /* ADD_GRAM_STRS, set by the caller after vocab_load: the token cache's table of
     * ASCII 2- and 3-character strs (struct gramslot, 1 << gbits slots); NULL: off. */
    struct gramslot *gslot;
    int gbits;
};

/* A slot of the gram strs' table: an ASCII str of 2 or 3 characters and its code
 * (length << 21 | c0 | c1 << 7 | c2 << 14), or s NULL: empty. */
struct gramslot {
    uint32_t code;
    PyObject *s;
};

/* acquire_all's table of gram strs: 1 << 16 slots (1 MiB), made per call. */
#define GRAMTAB_BITS_ALL 16

/* add_text_cached's and add_texts_cached's `flags` (knobs._ACQUIRE_FAST, knobs._UNTRACK). */
#define ADD_ACQUIRE_FAST 1
#define ADD_UNTRACK 2
/* knobs._CACHE_UCS: a text that is not ASCII served by the token cache too. */
#define ADD_CACHE_UCS 4
/* knobs._ACTIVE_BITS: a new ASCII token's 1/2-character substrings tested against the
 * active words' bits (struct active_bits) instead of made and looked up in the set. */
#define ADD_ACTIVE_BITS 8
/* knobs._SCAN_ONE: the tokens of an ASCII (or narrowed) text found in one pass, each
 * one's cache hash and first word computed as it is read (no counting pass first). */
#define ADD_SCAN_ONE 16
/* knobs._GRAM_STRS: a new ASCII token's 2- and 3-character substrings (its grams, the
 * active words in it, a new gram's parts) taken from a table of such strs kept in the
 * token cache (hashes cached in them) instead of made, hashed and freed each time. */
#define ADD_GRAM_STRS 32

/* flags checked: 0 to 63 (ADD_ACQUIRE_FAST | ADD_UNTRACK | ADD_CACHE_UCS |
 * ADD_ACTIVE_BITS | ADD_SCAN_ONE | ADD_GRAM_STRS), else ValueError. 0 or -1. */
static int
add_flags_check(int flags)
{
    if (flags < 0 || flags > (ADD_ACQUIRE_FAST | ADD_UNTRACK | ADD_CACHE_UCS |
                              ADD_ACTIVE_BITS | ADD_SCAN_ONE | ADD_GRAM_STRS)) {
        PyErr_Format(PyExc_ValueError, "flags must be 0 to 63, got %d", flags);
        return -1;
    }
    return 0;
}

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

/* The vocabulary's attribute names, interned once at import:
 * a lookup by a C string builds and hashes a str each time. */
static const char *vocab_names[] = {"_ids", "_items", "_refs", "_grams", "_sub", "_active",
                                    "_next_id"};
static PyObject *vocab_attr[7];
static PyObject *array_one; /* array('i', [0]): new posting lists are copies of it */

static int
vocab_names_init(void)
{
    for (int i = 0; i < 7; i++) {
        vocab_attr[i] = PyUnicode_InternFromString(vocab_names[i]);
        if (!vocab_attr[i]) return -1;
    }
    return 0;
}

static int
vocab_load(PyObject *obj, struct vocab *v)
{
    memset(v, 0, sizeof(*v));
    v->obj = obj;
    PyObject **slots[] = {&v->ids, &v->items, &v->refs, &v->grams, &v->sub};
    for (int i = 0; i < 5; i++) {
        PyObject *d = PyObject_GetAttr(obj, vocab_attr[i]);
        if (!d) goto fail;
        *slots[i] = d;
        if (check_dict(d, vocab_names[i]) < 0) goto fail;
    }
    v->active = PyObject_GetAttr(obj, vocab_attr[5]);
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

/* item[i:i + width] (a new reference, or NULL with an error set), as
 * PyUnicode_Substring makes it; with the gram strs' table (v->gslot) an ASCII item's
 * substring of 2 or 3 characters is the table's str of those characters, made and
 * entered (replacing the slot's) when the slot holds another. Equal strs, so the same
 * dict and set operations; the table's keep their hashes across calls. */
static PyObject *
gram_str(struct gramslot *gslot, int gbits, PyObject *item, Py_ssize_t i, Py_ssize_t width)
{
    if (!gslot || width < 2 || width > 3 || !PyUnicode_IS_ASCII(item)) {
        return PyUnicode_Substring(item, i, i + width);
    }
    const Py_UCS1 *d = PyUnicode_1BYTE_DATA(item) + i;
    uint32_t code = (uint32_t)width << 21 | (uint32_t)d[0] | (uint32_t)d[1] << 7 |
                    (width == 3 ? (uint32_t)d[2] << 14 : 0);
    struct gramslot *slot = &gslot[(code * 2654435761u) >> (32 - gbits)];
    if (slot->s && slot->code == code) return Py_NewRef(slot->s);
    PyObject *g = PyUnicode_New(width, 127);
    if (!g) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(g), d, (size_t)width);
    Py_XSETREF(slot->s, Py_NewRef(g));
    slot->code = code;
    return g;
}

static inline PyObject *
sub_str(struct vocab *v, PyObject *item, Py_ssize_t i, Py_ssize_t width)
{
    return gram_str(v->gslot, v->gbits, item, i, width);
}

/* count_words' probe grams (flag 32, the numbering's token cache handed over): the
 * token cache's table of gram strs, set for the length of one count_words call (no
 * Python code runs in it, and the capsule is held by its arguments); NULL otherwise. */
static struct gramslot *probe_gslot;
static int probe_gbits;

/* Whether the active words' bits serve `item` in this call (an ASCII item, the knob
 * on, every key of _active an exact str): 1, else 0; -1 with an error set. Builds the
 * bits when _active is not the set, or not of the size, they were built from:
 * O(len(_active)) then, else O(1). */
static int
active_bits_use(struct vocab *v, PyObject *item)
{
    struct active_bits *a = v->ab;
    if (!a || !PyUnicode_IS_ASCII(item)) return 0;
    if (a->set != v->active || a->len != PySet_GET_SIZE(v->active)) {
        Py_CLEAR(a->set); /* not valid until built in full */
        active_bits_builds++;
        memset(a->bits, 0, sizeof a->bits);
        a->state = 1;
        PyObject *it = PyObject_GetIter(v->active), *k;
        if (!it) return -1;
        while ((k = PyIter_Next(it)) != NULL) {
            if (!PyUnicode_CheckExact(k)) {
                a->state = 2;
            } else if (PyUnicode_IS_ASCII(k)) { /* others never equal an ASCII substring */
                Py_ssize_t len = PyUnicode_GET_LENGTH(k);
                const Py_UCS1 *d = PyUnicode_1BYTE_DATA(k);
                if (len == 1 || len == 2) {
                    unsigned b = len == 1 ? d[0] : 128u + ((unsigned)d[0] << 7 | d[1]);
                    a->bits[b >> 6] |= (uint64_t)1 << (b & 63);
                }
            }
            Py_DECREF(k);
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) return -1;
        a->set = Py_NewRef(v->active);
        a->len = PySet_GET_SIZE(v->active);
    }
    return a->state == 1;
}

/* Whether item[i:i + width] (width 1 or 2) is an active word: 1 with *s that substring
 * (a new reference), 0 with *s NULL, -1 with an error set. With `bits`
 * (active_bits_use's 1 for this item) a miss makes no substring and a hit needs no
 * set lookup: a bit is set only by an exact str of those code points. */
static int
active_sub(struct vocab *v, PyObject *item, Py_ssize_t i, Py_ssize_t width, int bits,
           PyObject **s)
{
    *s = NULL;
    if (bits) {
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(item) + i;
        unsigned b = width == 1 ? d[0] : 128u + ((unsigned)d[0] << 7 | d[1]);
        if (!(v->ab->bits[b >> 6] >> (b & 63) & 1)) return 0;
    }
    *s = sub_str(v, item, i, width);
    if (!*s) return -1;
    int in = bits ? 1 : PySet_Contains(v->active, *s);
    if (in <= 0) Py_CLEAR(*s);
    return in;
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
        if (set_add_steal(keys, sub_str(v, item, i, 3)) < 0) goto fail;
    }
    if (PySet_GET_SIZE(v->active)) {
        int bits = active_bits_use(v, item);
        if (bits < 0) goto fail;
        for (Py_ssize_t width = 1; width <= 2; width++) {
            for (Py_ssize_t i = 0; i + width <= n; i++) {
                PyObject *s;
                int in = active_sub(v, item, i, width, bits, &s);
                int r = in > 0 ? PySet_Add(keys, s) : in;
                Py_XDECREF(s);
                if (r < 0) goto fail;
            }
        }
    }
    return keys;
fail:
    Py_DECREF(keys);
    return NULL;
}

/* A key `g` with no gram list yet: grams[g] = [iid], and for a 3-gram, g entered in
 * the _sub set of each of its 1/2-character parts (SubstringVocab.acquire's `lst is
 * None` branch). 0, or -1 with an error set. */
static int
vocab_new_gram(struct vocab *v, PyObject *g, PyObject *iid)
{
    PyObject *fresh = PyList_New(1);
    if (!fresh) return -1;
    if (v->untrack) PyObject_GC_UnTrack(fresh);
    Py_INCREF(iid);
    PyList_SET_ITEM(fresh, 0, iid);
    int s = PyDict_SetItem(v->grams, g, fresh);
    Py_DECREF(fresh);
    if (s < 0) return -1;
    if (PyUnicode_GET_LENGTH(g) != 3) return 0;
    /* _parts(g): g[:2], g[1:], and its characters, each indexed to g. */
    PyObject *parts[5] = {
        sub_str(v, g, 0, 2), sub_str(v, g, 1, 2),
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
            if (one_set && v->untrack) PyObject_GC_UnTrack(one_set);
            if (!one_set || PySet_Add(one_set, g) < 0 ||
                PyDict_SetItem(v->sub, parts[k], one_set) < 0) {
                bad = 1;
            }
            Py_XDECREF(one_set);
        }
    }
    for (int k = 0; k < 5; k++) Py_XDECREF(parts[k]);
    if (bad) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_sub values must be sets");
        return -1;
    }
    return 0;
}

/* A new item's id: _next_id (a new reference, returned), _next_id + 1 stored back, and
 * item <-> id entered in _ids and _items. NULL with an error set. */
static PyObject *
vocab_new_id(struct vocab *v, PyObject *item)
{
    PyObject *next = PyObject_GetAttr(v->obj, vocab_attr[6]);
    if (!next) return NULL;
    if (!PyLong_CheckExact(next)) {
        Py_DECREF(next);
        PyErr_SetString(PyExc_TypeError, "_next_id must be an int");
        return NULL;
    }
    PyObject *one = PyLong_FromLong(1);
    PyObject *after = one ? PyNumber_Add(next, one) : NULL;
    Py_XDECREF(one);
    int bad = !after || PyObject_SetAttr(v->obj, vocab_attr[6], after) < 0 ||
              PyDict_SetItem(v->ids, item, next) < 0 || PyDict_SetItem(v->items, next, item) < 0;
    Py_XDECREF(after);
    if (bad) Py_CLEAR(next);
    return next;
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
    PyObject *next = vocab_new_id(v, item);
    if (!next) return -1;
    int r = -1;
    PyObject *keys = NULL, *it = NULL;
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
            if (list_append_wide(lst, next) < 0) goto fail_g;
            continue;
        }
        if (PyErr_Occurred() || vocab_new_gram(v, g, next) < 0) goto fail_g;
    }
    if (!PyErr_Occurred()) r = 0;
    goto done;
fail_g:
    Py_DECREF(g);
done:
    Py_XDECREF(it);
    Py_XDECREF(keys);
    Py_DECREF(next);
    return r;
}

/* The gram list of key `g` gets `iid` (a new item's id, so a list whose last id is
 * `iid` got it already: a key seen twice in the item); a key with no list is counted
 * in *nfresh, the first one kept in *first (a new reference). 0, or -1. */
static int
vocab_key_fast(struct vocab *v, PyObject *g, PyObject *iid, PyObject **first,
               Py_ssize_t *nfresh)
{
    PyObject *lst = PyDict_GetItemWithError(v->grams, g);
    if (lst) {
        if (!PyList_CheckExact(lst)) {
            PyErr_SetString(PyExc_TypeError, "gram lists must be lists");
            return -1;
        }
        Py_ssize_t m = PyList_GET_SIZE(lst);
        if (m && PyList_GET_ITEM(lst, m - 1) == iid) return 0;
        return list_append_wide(lst, iid);
    }
    if (PyErr_Occurred()) return -1;
    if (!*first) {
        *first = Py_NewRef(g);
        *nfresh = 1;
        return 0;
    }
    if (*nfresh == 1) {
        int eq = PyUnicode_Compare(*first, g);
        if (eq == -1 && PyErr_Occurred()) return -1;
        if (eq != 0) *nfresh = 2;
    }
    return 0;
}

/* vocab_acquire, the same structures, without the key set for most new items
 * (knobs._ACQUIRE_FAST): the keys are visited in the item's order, each existing gram
 * list appended to at once (an item's keys are distinct in the set; here a list that
 * ends with the new id already has it). The keys with no list yet, whose order
 * decides the order of _grams and of the _sub sets, are then entered in the key set's
 * order as before: one needs no set; two or more take the set (vocab_keys). An item
 * already in the vocabulary, or of 1 or 2 characters, takes vocab_acquire. */
static int
vocab_acquire_fast(struct vocab *v, PyObject *item)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(item);
    if (n <= 2) return vocab_acquire(v, item);
    PyObject *iid = PyDict_GetItemWithError(v->ids, item); /* borrowed */
    if (iid || PyErr_Occurred()) return iid ? vocab_acquire(v, item) : -1;
    PyObject *next = vocab_new_id(v, item);
    if (!next) return -1;
    int r = -1;
    PyObject *first = NULL, *keys = NULL, *it = NULL;
    Py_ssize_t nfresh = 0;
    for (Py_ssize_t i = 0; i + 3 <= n; i++) {
        PyObject *g = sub_str(v, item, i, 3);
        if (!g) goto done;
        int k = vocab_key_fast(v, g, next, &first, &nfresh);
        Py_DECREF(g);
        if (k < 0) goto done;
    }
    if (PySet_GET_SIZE(v->active)) {
        int bits = active_bits_use(v, item);
        if (bits < 0) goto done;
        for (Py_ssize_t width = 1; width <= 2; width++) {
            for (Py_ssize_t i = 0; i + width <= n; i++) {
                PyObject *s;
                int in = active_sub(v, item, i, width, bits, &s);
                int k = in > 0 ? vocab_key_fast(v, s, next, &first, &nfresh) : in;
                Py_XDECREF(s);
                if (k < 0) goto done;
            }
        }
    }
    if (nfresh == 1) {
        if (vocab_new_gram(v, first, next) < 0) goto done;
    } else if (nfresh > 1) {
        keys = vocab_keys(v, item);
        if (!keys) goto done;
        it = PyObject_GetIter(keys);
        if (!it) goto done;
        PyObject *g;
        while ((g = PyIter_Next(it)) != NULL) {
            PyObject *lst = PyDict_GetItemWithError(v->grams, g);
            int k = lst ? 0 : PyErr_Occurred() ? -1 : vocab_new_gram(v, g, next);
            Py_DECREF(g);
            if (k < 0) goto done;
        }
        if (PyErr_Occurred()) goto done;
    }
    r = 0;
done:
    Py_XDECREF(it);
    Py_XDECREF(keys);
    Py_XDECREF(first);
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

/* The arguments add_text and add_text_known share, parsed and checked (an exact dict,
 * an exact str, a gid in [0, 2^31), the vocabulary), and `low.split()`: a new list, or
 * NULL with an error set. */
static PyObject *
add_args(PyObject *args, PyObject **post, long *gid, PyObject **vocab_obj)
{
    PyObject *low;
    if (!PyArg_ParseTuple(args, "O!UlO", &PyDict_Type, post, &low, gid, vocab_obj)) {
        return NULL;
    }
    if (!PyDict_CheckExact(*post) || !PyUnicode_CheckExact(low)) {
        PyErr_SetString(PyExc_TypeError, "post must be a dict and low a str");
        return NULL;
    }
    if (*gid < 0 || *gid > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "gid out of range");
        return NULL;
    }
    return PyUnicode_Split(low, NULL, -1);
}

PyDoc_STRVAR(add_text_doc,
"add_text(post, low, gid, vocab) -> int\n\n"
"Index the lower-cased text `low` under the new group number `gid`: for each distinct\n"
"token of low.split(), gid appended to its posting list post[token] (an array('i')),\n"
"or, for a new token, vocab.acquire(token) and post[token] = array('i', [gid]).\n"
"Returns the number of new tokens. O(tokens), plus O(len(token)) per new token.");

/* add_text's work once `low` is split into `words` (a list, borrowed): the token set,
 * then one add_token per token in the set's order. The number of new tokens, or NULL
 * with an error set. */
static PyObject *
add_words(PyObject *post, PyObject *words, long gid, PyObject *vocab_obj)
{
    PyObject *toks = PySet_New(words);
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

static PyObject *
add_text(PyObject *self, PyObject *args)
{
    PyObject *post, *vocab_obj;
    long gid;
    PyObject *words = add_args(args, &post, &gid, &vocab_obj);
    if (!words) return NULL;
    PyObject *result = add_words(post, words, gid, vocab_obj);
    Py_DECREF(words);
    return result;
}

PyDoc_STRVAR(acquire_all_doc,
"acquire_all(vocab, toks, flags) -> int\n\n"
"vocab.acquire(tok) for each tok of `toks` (an exact set or list of exact strs), in\n"
"its iteration order, the ids dropped: the structures add_text gives the vocabulary\n"
"for the same tokens in the same order, with no posting list made. flags: 0 to 63,\n"
"as add_texts_cached's, of which ADD_ACQUIRE_FAST (1: vocab_acquire_fast), ADD_UNTRACK\n"
"(2: new gram lists and _sub sets untracked) and ADD_GRAM_STRS (32: the tokens' 2-\n"
"and 3-character substrings from a table of strs made for this call) are read. An\n"
"item that is not an exact str: TypeError, the items before it acquired. Returns\n"
"the number of new items. O(sum of len(tok)).");

/* The tokens of an index image, acquired in one call (the image's restore builds the
 * vocabulary of every token ahead of the rows: add_text on the joined tokens made a
 * posting list per token only to drop it, and took the slow acquire). */
static PyObject *
acquire_all(PyObject *self, PyObject *args)
{
    PyObject *vocab_obj, *toks;
    int flags;
    if (!PyArg_ParseTuple(args, "OOi", &vocab_obj, &toks, &flags)) return NULL;
    if (add_flags_check(flags) < 0) return NULL;
    if (!PySet_CheckExact(toks) && !PyList_CheckExact(toks)) {
        PyErr_SetString(PyExc_TypeError, "toks must be a set or a list");
        return NULL;
    }
    struct vocab v;
    if (vocab_load(vocab_obj, &v) < 0) return NULL;
    v.untrack = (flags & ADD_UNTRACK) != 0;
    struct gramslot *table = NULL;
    if (flags & ADD_GRAM_STRS) {
        table = PyMem_Calloc((size_t)1 << GRAMTAB_BITS_ALL, sizeof(struct gramslot));
        if (!table) {
            vocab_release(&v);
            return PyErr_NoMemory();
        }
        v.gslot = table;
        v.gbits = GRAMTAB_BITS_ALL;
    }
    Py_ssize_t before = PyDict_GET_SIZE(v.ids);
    PyObject *result = NULL;
    PyObject *it = PyObject_GetIter(toks), *tok;
    if (!it) goto done;
    while ((tok = PyIter_Next(it)) != NULL) {
        int r;
        if (!PyUnicode_CheckExact(tok)) {
            PyErr_SetString(PyExc_TypeError, "toks must hold exact strs");
            r = -1;
        } else {
            r = (flags & ADD_ACQUIRE_FAST) ? vocab_acquire_fast(&v, tok) : vocab_acquire(&v, tok);
        }
        Py_DECREF(tok);
        if (r < 0) break;
    }
    Py_DECREF(it);
    if (!PyErr_Occurred()) result = PyLong_FromSsize_t(PyDict_GET_SIZE(v.ids) - before);
done:
    if (table) {
        for (size_t i = 0; i < ((size_t)1 << GRAMTAB_BITS_ALL); i++) Py_XDECREF(table[i].s);
        PyMem_Free(table);
    }
    vocab_release(&v);
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
 * (nothing contains w; that gram in *missing, a new reference, when `missing` is not
 * NULL), or NULL with an error set. */
static PyObject *
candidates(PyObject *grams, PyObject *w, int *absent, Py_ssize_t *at, PyObject **missing)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(w) - 2;
    Py_ssize_t probes = n <= 8 ? n : 8;
    PyObject *best = NULL;
    *absent = 0;
    for (Py_ssize_t k = 0; k < probes; k++) {
        Py_ssize_t i = n <= 8 ? k : (Py_ssize_t)((double)k * (double)(n - 1) / 7.0 + 0.5);
        if (i > n - 1) i = n - 1;
        PyObject *g = gram_str(probe_gslot, probe_gbits, w, i, 3);
        if (!g) return NULL;
        PyObject *lst = PyDict_GetItemWithError(grams, g);
        if (!lst && !PyErr_Occurred()) {
            *absent = 1;
            if (missing) {
                *missing = g; /* handed over */
                return NULL;
            }
        }
        Py_DECREF(g);
        if (!lst) return NULL;
        if (!PyList_CheckExact(lst)) {
            PyErr_SetString(PyExc_TypeError, "gram lists must be lists");
            return NULL;
        }
        if (!best || PyList_GET_SIZE(lst) < PyList_GET_SIZE(best)) {
            best = lst;
            *at = i;
        }
    }
    return best;
}

/* Whether `w` occurs in `item` (PyUnicode_Find(item, w, ...) >= 0): 1, 0, or -1 with an
 * error set. With `bytes` (count_words' flag 16) two strs of one byte per character
 * (ASCII or Latin-1: equal bytes are equal code points) are compared as bytes here, the
 * first character found by a byte loop and the rest compared in place: a token is a
 * few dozen characters, where PyUnicode_Find's set-up (kinds, bounds, its search's
 * tables) is most of its ~250 instructions. Any other pair takes PyUnicode_Find. */
static inline int
word_in(PyObject *item, PyObject *w, int bytes)
{
    /* (A str not ready, of Python 3.11's legacy kind 0, takes PyUnicode_Find.) */
    if (bytes && PyUnicode_KIND(item) == PyUnicode_1BYTE_KIND &&
        PyUnicode_KIND(w) == PyUnicode_1BYTE_KIND) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(item), m = PyUnicode_GET_LENGTH(w);
        if (m == 0) return 1;
        if (m > n) return 0;
        const Py_UCS1 *h = PyUnicode_1BYTE_DATA(item), *x = PyUnicode_1BYTE_DATA(w);
        const Py_UCS1 first = x[0];
        for (Py_ssize_t i = 0, last = n - m; i <= last; i++) {
            if (h[i] != first) continue;
            Py_ssize_t j = 1;
            while (j < m && h[i + j] == x[j]) j++;
            if (j == m) return 1;
        }
        return 0;
    }
    Py_ssize_t at = PyUnicode_Find(item, w, 0, PY_SSIZE_T_MAX, 1);
    return at == -2 ? -1 : at >= 0;
}

/* ------------------------------------------------------------------ candidate signatures
 *
 * count_words' flag 128 (knobs._CAND_SIGS): before a candidate token of a word of 4 or
 * more characters is looked up in the vocabulary's item dict and searched (word_in),
 * its *signature* is tested: one bit of 32 for every distinct 3-character substring of
 * the token (its three code points hashed), kept per token id in the numbering's token
 * cache. A word occurs in a token only if each of the word's 3-character substrings
 * does, so a token whose signature lacks a bit of the word's cannot contain it and is
 * skipped unread; any other candidate is looked up and searched as before. The same
 * answers, exactly; in the main job ~86% of the candidates are skipped (each cost a
 * dict probe and a read of a token str that the search then rejected). A token's
 * signature is taken when it is first read as a candidate (ids are never reused and
 * an id's item never changes within one item dict, which the table holds), so an id
 * not seen yet, or above SIG_MAX_ID, is simply not filtered. */
struct candsigs {
    PyObject *items; /* the item dict the signatures are of (held), or NULL */
    uint32_t *sig;   /* by id: 0 unknown, else the token's bits | 1 */
    Py_ssize_t cap;  /* ids with room in sig */
};
#define SIG_MAX_ID ((Py_ssize_t)1 << 26)

/* The table of the count_words call running (flag 128 with a token cache), or NULL. */
static struct candsigs *cand_sigs;

static inline uint32_t
gram_bit(Py_UCS4 a, Py_UCS4 b, Py_UCS4 c)
{
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ull + (uint64_t)b * 0xC2B2AE3D27D4EB4Full +
                 (uint64_t)c * 0x165667B19E3779F9ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    return (uint32_t)1 << (h >> 59);
}

/* The signature bits of str s (every 3-character substring's bit; 0 for a str of
 * fewer than 3 characters). O(len(s)). */
static uint32_t
str_sig(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    uint32_t sig = 0;
    if (n < 3) return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = data;
        for (Py_ssize_t i = 0; i + 2 < n; i++) sig |= gram_bit(d[i], d[i + 1], d[i + 2]);
    } else {
        for (Py_ssize_t i = 0; i + 2 < n; i++) {
            sig |= gram_bit(PyUnicode_READ(kind, data, i), PyUnicode_READ(kind, data, i + 1),
                            PyUnicode_READ(kind, data, i + 2));
        }
    }
    return sig;
}

/* The word's bits, taken once per word (*mask 0: not taken yet; bit 32 marks it
 * taken). */
static inline uint32_t
word_sig(PyObject *w, uint64_t *mask)
{
    if (!*mask) *mask = (uint64_t)str_sig(w) | ((uint64_t)1 << 32);
    return (uint32_t)*mask;
}

/* Whether candidate `id` is known not to contain a word of bits `wbits`; its id in *v
 * (-1 when it is not a non-negative int). */
static inline int
sig_rejects(PyObject *id, uint32_t wbits, Py_ssize_t *v)
{
    struct candsigs *cs = cand_sigs;
    *v = -1;
    if (!cs || !wbits || !PyLong_CheckExact(id)) return 0;
    Py_ssize_t x = PyLong_AsSsize_t(id);
    if (x < 0) {
        if (PyErr_Occurred()) PyErr_Clear(); /* not an id of ours: not filtered */
        return 0;
    }
    *v = x;
    if (x >= cs->cap) return 0;
    uint32_t t = cs->sig[x];
    return t && (t & wbits) != wbits;
}

/* Note the signature of item `item` of id v (from sig_rejects) if it is not known yet.
 * Never fails: without memory for a larger table the id stays unfiltered. */
static inline void
sig_note(Py_ssize_t v, PyObject *item)
{
    struct candsigs *cs = cand_sigs;
    if (!cs || v < 0 || v >= SIG_MAX_ID) return;
    if (v >= cs->cap) {
        Py_ssize_t cap = cs->cap ? cs->cap : 1024;
        while (cap <= v) cap *= 2;
        uint32_t *sig = PyMem_Realloc(cs->sig, sizeof(uint32_t) * (size_t)cap);
        if (!sig) return;
        memset(sig + cs->cap, 0, sizeof(uint32_t) * (size_t)(cap - cs->cap));
        cs->sig = sig;
        cs->cap = cap;
    }
    if (!cs->sig[v]) cs->sig[v] = str_sig(item) | 1u;
}

/* Keep `found`, the ids of the tokens that contain `w` among the first `end` ids of
 * the candidate list `best`, in the vocabulary's long-word cache as
 * SubstringVocab.lookup_steps does: the entry (best, end, found), the oldest entry
 * dropped first when the cache holds `cache_size` words. 0, or -1 with an error. */
static int
cache_keep(PyObject *cache, Py_ssize_t cache_size, PyObject *w, PyObject *best,
           Py_ssize_t end, PyObject *found)
{
    int in = PyDict_Contains(cache, w);
    if (in < 0) return -1;
    if (!in && PyDict_GET_SIZE(cache) >= cache_size) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        if (PyDict_Next(cache, &pos, &key, &value)) { /* the oldest first */
            Py_INCREF(key);
            int r = PyDict_DelItem(cache, key);
            Py_DECREF(key);
            if (r < 0) return -1;
        }
    }
    PyObject *entry = Py_BuildValue("(OnO)", best, end, found);
    if (!entry) return -1;
    int r = PyDict_SetItem(cache, w, entry);
    Py_DECREF(entry);
    return r;
}

/* The ids of the tokens that contain `w` (4 or more characters), by the vocabulary's
 * long-word cache as SubstringVocab.lookup_steps keeps it: a cached answer for the same
 * candidate list is reused, its new tail verified, and the answer remembered (the
 * oldest word dropped beyond `cache_size`). A new reference; or NULL with *absent set
 * (nothing contains w), *big set (more than `limit` candidates to verify), or an error.
 * Adds the candidates verified to *work. The candidate list read (every one of its ids
 * verified on success) is *best_out (borrowed), the start of its 3-gram in w *at; with
 * *absent set, *missing the gram found missing (as candidates). A NULL `cache` is
 * neither read nor written (every candidate verified). */
static PyObject *
long_word_ids(PyObject *grams, PyObject *items, PyObject *cache, Py_ssize_t cache_size,
              PyObject *w, Py_ssize_t limit, int *absent, int *big, Py_ssize_t *work,
              PyObject **best_out, Py_ssize_t *at, PyObject **missing, int bytes,
              uint64_t *wmask)
{
    PyObject *best = candidates(grams, w, absent, at, missing);
    *best_out = best;
    if (!best) return NULL;
    Py_ssize_t end = PyList_GET_SIZE(best), scanned = 0;
    PyObject *old = NULL;
    PyObject *hit = cache ? PyDict_GetItemWithError(cache, w) : NULL;
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
    uint32_t wbits = wmask && cand_sigs ? word_sig(w, wmask) : 0;
    for (Py_ssize_t j = scanned; j < end; j++) {
        PyObject *id = PyList_GET_ITEM(best, j);
        Py_ssize_t v = -1;
        if (wbits && sig_rejects(id, wbits, &v)) continue; /* cannot contain w */
        PyObject *item = PyDict_GetItemWithError(items, id);
        if (!item) {
            if (PyErr_Occurred()) goto fail;
            continue; /* removed since */
        }
        if (!PyUnicode_CheckExact(item)) {
            PyErr_SetString(PyExc_TypeError, "vocabulary items must be str");
            goto fail;
        }
        if (wbits) sig_note(v, item);
        int in = word_in(item, w, bytes);
        if (in < 0 || (in > 0 && PyList_Append(found, id) < 0)) goto fail;
    }
    if (!cache) return found; /* not read, not kept */
    if (cache_keep(cache, cache_size, w, best, end, found) < 0) goto fail;
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* ------------------------------------------------------------------ word memo */

/* A query word's match set kept across retrieves (count_words' `memo`): the posting
 * arrays of the tokens that contain the word, how much of each was read, and the
 * distinct group numbers read from them, sorted. The owner only appends to a posting
 * array while the numbering's `epoch` stays the same (a purge that replaces or deletes
 * one bumps it), and a new token containing the word is appended to every gram list of
 * its 3-grams, so the set is brought up to date from the arrays' new tails and the new
 * ids of the gram list `best` (the list of the 3-gram `gram` of the word, still that
 * object in the gram dict). Readers of any bound share it: it holds every number read,
 * each reader counts those below its own n. Kept in a capsule; no Python code runs
 * while one is read or changed. */
struct memo {
    PyObject *gram, *best; /* the 3-gram and its gram list (owned) */
    Py_ssize_t end;        /* ids of `best` looked at */
    Py_ssize_t epoch;      /* the numbering's epoch when built */
    Py_ssize_t narr, carr; /* posting arrays held (owned), room */
    PyObject **arrs;
    Py_ssize_t *seen;      /* numbers read of each array */
    Py_ssize_t total;      /* sum of seen */
    int32_t *set;          /* the distinct group numbers read, in no order */
    Py_ssize_t nset, cset;
    int32_t most;          /* the largest of them (when nset > 0) */
};

static const char MEMO_NAME[] = "actormem._index._cwordoverlap.memo";

static void
memo_destroy(PyObject *capsule)
{
    struct memo *m = PyCapsule_GetPointer(capsule, MEMO_NAME);
    if (!m) {
        PyErr_Clear();
        return;
    }
    Py_XDECREF(m->gram);
    Py_XDECREF(m->best);
    for (Py_ssize_t j = 0; j < m->narr; j++) Py_DECREF(m->arrs[j]);
    PyMem_Free(m->arrs);
    PyMem_Free(m->seen);
    PyMem_Free(m->set);
    PyMem_Free(m);
}

/* The buffer of a posting list, which must be an array('i') (4-byte ints): 0, or -1
 * with TypeError set (nothing held). An array of another typecode is refused here, not
 * read as int32. */
static int
posting_buffer(PyObject *lst, Py_buffer *lb)
{
    if (PyObject_GetBuffer(lst, lb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *lf = lb->format ? lb->format : "B";
    if (lb->ndim != 1 || lb->itemsize != 4 || (lf[0] != 'i' && lf[0] != 'l') || lf[1] != '\0') {
        PyBuffer_Release(lb);
        PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
        return -1;
    }
    if (check_aligned(lb, "posting list") < 0) { /* an int32 view, not an array('i') */
        PyBuffer_Release(lb);
        return -1;
    }
    return 0;
}

/* Hold `arr` (an array('i'), its typecode checked here) with nothing of it read yet. 0,
 * or -1 with an error set. */
static int
memo_hold(struct memo *m, PyObject *arr)
{
    Py_buffer lb;
    if (posting_buffer(arr, &lb) < 0) return -1;
    PyBuffer_Release(&lb);
    if (m->narr == m->carr) {
        Py_ssize_t room = m->carr ? 2 * m->carr : 4;
        PyObject **arrs = PyMem_Realloc(m->arrs, sizeof(PyObject *) * (size_t)room);
        if (!arrs) goto nomem;
        m->arrs = arrs;
        Py_ssize_t *seen = PyMem_Realloc(m->seen, sizeof(Py_ssize_t) * (size_t)room);
        if (!seen) goto nomem;
        m->seen = seen;
        m->carr = room;
    }
    m->arrs[m->narr] = Py_NewRef(arr);
    m->seen[m->narr++] = 0;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* Put the numbers new[0:k] (distinct) into the set, which stays distinct: appended
 * when all are above its largest (the usual case: the owner appends ever larger numbers),
 * else appended and the whole set made distinct again with `table` (room for `cap`
 * numbers, a power of two at least twice the set's size). 0, or -1 (no memory). */
static int
memo_merge(struct memo *m, const int32_t *new, Py_ssize_t k, int32_t *table, size_t cap)
{
    if (!k) return 0;
    int32_t least = new[0], most = new[0];
    for (Py_ssize_t j = 1; j < k; j++) {
        if (new[j] < least) least = new[j];
        if (new[j] > most) most = new[j];
    }
    if (m->nset + k > m->cset) {
        Py_ssize_t room = m->nset + k + (m->nset + k) / 2 + 4;
        int32_t *set = PyMem_Realloc(m->set, sizeof(int32_t) * (size_t)room);
        if (!set) {
            PyErr_NoMemory();
            return -1;
        }
        m->set = set;
        m->cset = room;
    }
    memcpy(m->set + m->nset, new, sizeof(int32_t) * (size_t)k);
    int appended = !m->nset || least > m->most;
    m->nset += k;
    if (!appended) {
        size_t size = 16;
        while (size < 2 * (size_t)m->nset) size *= 2;
        m->nset = distinct(m->set, m->nset, table, size <= cap ? size : cap);
    }
    if (appended || most > m->most) m->most = most;
    return 0;
}

/* Read the new tails of the held arrays into the set, using `tmp` (room for `limit`
 * numbers) and `table` (room for `cap`, a power of two at least 2 * limit). 1 when the arrays hold `limit` numbers or more in all (the word is left to
 * the caller, as count_words leaves such words), else 0; -1 with an error set. */
static int
memo_read_tails(struct memo *m, Py_ssize_t limit, int32_t *tmp, int32_t *table, size_t cap,
                Py_ssize_t *work)
{
    Py_ssize_t k = 0;
    for (Py_ssize_t j = 0; j < m->narr; j++) {
        PyObject *arr = m->arrs[j];
        Py_ssize_t len = Py_SIZE(arr); /* an array('i') (checked when held) */
        if (len <= m->seen[j]) continue;
        if (m->total + (len - m->seen[j]) >= limit) return 1;
        Py_buffer lb;
        if (posting_buffer(arr, &lb) < 0) return -1;
        if (lb.len / 4 < len) {
            PyBuffer_Release(&lb);
            PyErr_SetString(PyExc_ValueError, "a posting array shorter than its length");
            return -1;
        }
        const int32_t *g = (const int32_t *)lb.buf;
        for (Py_ssize_t q = m->seen[j]; q < len; q++) {
            if (g[q] >= 0) tmp[k++] = g[q]; /* as count_words reads a list */
        }
        PyBuffer_Release(&lb);
        m->total += len - m->seen[j];
        m->seen[j] = len;
    }
    *work += m->narr / 8 + k;
    if (k > 1) {
        size_t size = 16;
        while (size < 2 * (size_t)k) size *= 2;
        k = distinct(tmp, k, table, size <= cap ? size : cap);
    }
    return memo_merge(m, tmp, k, table, cap);
}

/* Bring the memo of `w` up to date: the ids added to its gram list since (verified to
 * contain w when `verify`, as the long-word lookup does), then the arrays' new tails.
 * With `trust` (count_words' MEMO_EPOCH_ONLY: the memo's numbering is the owner's
 * current one, whose epoch every replacement or deletion of a gram list bumps) a memo
 * of this epoch still holds its gram's list, so the gram dict is not probed for it.
 * 0 done; 1 the word is to be left to the caller (too many numbers or candidates); 2
 * stale (rebuild it); -1 with an error set. */
static int
memo_refresh(struct memo *m, PyObject *w, int verify, PyObject *grams, PyObject *items,
             PyObject *post, Py_ssize_t epoch, Py_ssize_t limit, int32_t *tmp,
             int32_t *table, size_t cap, Py_ssize_t *work, int bytes, uint64_t *wmask,
             int trust)
{
    if (m->epoch != epoch) return 2;
    /* Built under a larger limit than this call's: its set may not fit this call's
     * buffers (room for `limit` numbers), and this call would leave the word anyway. */
    if (m->total >= limit) return 2;
    if (!trust) {
        PyObject *now = PyDict_GetItemWithError(grams, m->gram);
        if (!now && PyErr_Occurred()) return -1;
        if (now != m->best) return 2;
    }
    Py_ssize_t end = PyList_GET_SIZE(m->best);
    if (end - m->end > limit) return 2;
    *work += end - m->end;
    uint32_t wbits = verify && wmask && cand_sigs && end > m->end ? word_sig(w, wmask) : 0;
    for (Py_ssize_t j = m->end; j < end; j++) {
        PyObject *id = PyList_GET_ITEM(m->best, j);
        Py_ssize_t v = -1;
        if (wbits && sig_rejects(id, wbits, &v)) continue; /* cannot contain w */
        PyObject *item = PyDict_GetItemWithError(items, id);
        if (!item) {
            if (PyErr_Occurred()) return -1;
            continue; /* removed since */
        }
        if (!PyUnicode_CheckExact(item)) {
            PyErr_SetString(PyExc_TypeError, "vocabulary items must be str");
            return -1;
        }
        if (wbits) sig_note(v, item);
        if (verify) {
            int in = word_in(item, w, bytes);
            if (in < 0) return -1;
            if (!in) continue;
        }
        PyObject *lst = PyDict_GetItemWithError(post, item);
        if (!lst) {
            if (PyErr_Occurred()) return -1;
            continue;
        }
        if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
            PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
            return -1;
        }
        if (memo_hold(m, lst) < 0) return -1;
    }
    m->end = end;
    if (m->narr > limit) return 1;
    return memo_read_tails(m, limit, tmp, table, cap, work);
}

/* The numbers of the set below n: the set itself (*src) when all are, else those copied
 * to `buf` (room for the set). Their count. O(set) at most. */
static Py_ssize_t
memo_below(const struct memo *m, Py_ssize_t n, int32_t *buf, const int32_t **src)
{
    if (!m->nset || m->most < n) {
        *src = m->set;
        return m->nset;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t j = 0; j < m->nset; j++) {
        if (m->set[j] < n) buf[k++] = m->set[j];
    }
    *src = buf;
    return k;
}

/* A new memo of a word: the gram list `best` (of the 3-gram of w at `at`) looked at up
 * to `end`, the posting arrays lists[0:nl] (array('i'), checked). A new capsule, or NULL
 * with an error set. */
static PyObject *
memo_new(PyObject *w, Py_ssize_t at, PyObject *best, Py_ssize_t end, Py_ssize_t epoch,
         PyObject **lists, Py_ssize_t nl)
{
    struct memo *m = PyMem_Calloc(1, sizeof(struct memo));
    if (!m) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(m, MEMO_NAME, memo_destroy);
    if (!capsule) {
        PyMem_Free(m);
        return NULL;
    }
    m->gram = gram_str(probe_gslot, probe_gbits, w, at, 3);
    if (!m->gram) goto fail;
    m->best = Py_NewRef(best);
    m->end = end;
    m->epoch = epoch;
    for (Py_ssize_t j = 0; j < nl; j++) {
        if (memo_hold(m, lists[j]) < 0) goto fail;
    }
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* Numbers (set members and arrays) a generation holds on average per word before it
 * turns old: bounds the memo's memory when the words' sets are large. */
#define MEMO_NUMBERS_PER_WORD 128

/* The numbers a memo value counts for in its generation: a memo's set and arrays, or 1
 * for an absent word's marker (a str). */
static Py_ssize_t
memo_numbers(PyObject *value)
{
    if (PyUnicode_CheckExact(value)) return 1;
    struct memo *m = PyCapsule_GetPointer(value, MEMO_NAME);
    if (!m) return -1;
    return m->nset + m->narr;
}

/* Count `numbers` more into the young generation (memo[2]); once it holds `cap` words
 * or MEMO_NUMBERS_PER_WORD times as many numbers, it becomes the old one (the old
 * dropped). 0, or -1 with an error set. */
static int
memo_grew(PyObject *memo, Py_ssize_t numbers, Py_ssize_t cap)
{
    PyObject *young = PyList_GET_ITEM(memo, 0);
    Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(memo, 2));
    if (size == -1 && PyErr_Occurred()) return -1;
    size += numbers;
    if (PyDict_GET_SIZE(young) >= cap || size >= cap * MEMO_NUMBERS_PER_WORD) {
        PyObject *fresh = PyDict_New();
        if (!fresh) return -1;
        Py_INCREF(young);
        PyList_SetItem(memo, 1, young); /* drops the old generation */
        PyList_SetItem(memo, 0, fresh);
        size = 0;
    }
    PyObject *now = PyLong_FromSsize_t(size);
    if (!now) return -1;
    PyList_SetItem(memo, 2, now);
    return 0;
}

/* The memo of `w` from the two generations memo[0] (young) and memo[1] (old), an old
 * one moved to the young; borrowed (held by the memo), or NULL (none, or an error
 * set). When w holds an absent word's marker instead (a str: a 3-gram of w that was
 * missing from the gram dict, see count_words' `absent`), NULL with *marker = it
 * (borrowed, held by the memo like a memo). */
static struct memo *
memo_find(PyObject *memo, PyObject *w, Py_ssize_t cap_words, PyObject **marker)
{
    PyObject *young = PyList_GET_ITEM(memo, 0), *old = PyList_GET_ITEM(memo, 1);
    *marker = NULL;
    PyObject *cap = PyDict_GetItemWithError(young, w);
    if (!cap) {
        if (PyErr_Occurred()) return NULL;
        cap = PyDict_GetItemWithError(old, w);
        if (!cap) return NULL;
        Py_ssize_t numbers = memo_numbers(cap);
        if (numbers < 0) return NULL;
        Py_INCREF(cap);
        int r = PyDict_DelItem(old, w);
        if (r == 0) r = PyDict_SetItem(young, w, cap);
        Py_DECREF(cap); /* held by young now */
        if (r < 0 || memo_grew(memo, numbers, cap_words) < 0) return NULL;
        /* held by the young generation, or the old one it turned into */
    }
    if (PyUnicode_CheckExact(cap)) {
        *marker = cap;
        return NULL;
    }
    return PyCapsule_GetPointer(cap, MEMO_NAME);
}

/* Drop w's memo from whichever generation holds it. 0, or -1 with an error set. */
static int
memo_drop(PyObject *memo, PyObject *w)
{
    for (int gen = 0; gen < 2; gen++) {
        PyObject *d = PyList_GET_ITEM(memo, gen);
        int in = PyDict_Contains(d, w);
        if (in < 0) return -1;
        if (in) return PyDict_DelItem(d, w);
    }
    return 0;
}

/* Keep `value` (a new memo's capsule, or an absent word's marker; stolen) as w's in
 * the young generation (memo_grew). 0, or -1. */
static int
memo_keep(PyObject *memo, PyObject *w, PyObject *value, Py_ssize_t cap)
{
    PyObject *young = PyList_GET_ITEM(memo, 0);
    Py_ssize_t numbers = memo_numbers(value);
    int r = numbers < 0 ? -1 : PyDict_SetItem(young, w, value);
    Py_DECREF(value);
    if (r < 0) return -1;
    return memo_grew(memo, numbers, cap);
}

/* ------------------------------------------------------------------ bit-sliced counts */

/* A retrieve's matched-word counts, bit-sliced: `planes` (uint64) holds, for the 64
 * groups 64w .. 64w + 63, `np` words at planes[w * np .. w * np + np - 1]; bit (g & 63)
 * of word j is bit j of group g's count (word-major, so one group's planes share a
 * cache line). Adding a set of groups given as a 64-bit word x is a ripple-carry add of
 * x into the planes (a half adder per plane, stopped once no lane carries); adding it
 * m times adds x once at every plane j where bit j of m is set. Counts never exceed
 * 2**np - 1 when the caller picks np >= bit_length(sum of multiplicities); a carry
 * out of the top plane would be dropped. Match sets are bitsets in the same numbering
 * (bit g & 63 of word g >> 6). */

#define MAX_PLANES 32

static inline void
bs_add(uint64_t *restrict p, int np, uint64_t x, uint64_t m)
{
    for (int j = 0; m && j < np; j++, m >>= 1) {
        if (!(m & 1)) continue;
        uint64_t c = x;
        for (int k = j; c && k < np; k++) {
            uint64_t t = p[k] & c;
            p[k] ^= c;
            c = t;
        }
    }
}

/* Bits of word w that are groups below n. */
static inline uint64_t
below_n(Py_ssize_t w, Py_ssize_t n)
{
    Py_ssize_t left = n - w * 64;
    if (left >= 64) return ~(uint64_t)0;
    if (left <= 0) return 0;
    return ((uint64_t)1 << left) - 1;
}

/* Words of bits for n groups (n >= 0; every caller checks that first). Not
 * (n + 63) / 64: near PY_SSIZE_T_MAX that overflows to a negative count which
 * passes the "bitset long enough" checks, and any group number below n is then
 * written far past the bitset. */
#define NWORDS(n) ((n) / 64 + ((n) % 64 != 0))

PyDoc_STRVAR(count_words_doc,
"count_words(words, mults, start, budget, limit, grams, items, cache, cache_size,\n"
"            post, skip, short, counts, n, np=0, memo=None, epoch=0, memo_cap=1,\n"
"            flags=0, tcap=None)\n"
"            -> (int, list[int])\n\n"
"From words[start:] (distinct lower-cased query words, mults their multiplicities):\n"
"for each word of 3 or more characters that is not in `short` (a dict) nor in `skip`\n"
"(a dict: the cached match sets), whose candidate tokens (from the vocabulary's gram\n"
"dict `grams`, item dict `items` and long-word cache `cache`, kept as\n"
"SubstringVocab.lookup_steps keeps it) number at most `limit` and whose lists in\n"
"`post` hold fewer than `limit` group numbers in all, counts[g] += mult once for every\n"
"distinct group number g < n of those lists. Every other word is left to the caller.\n"
"Stops after the word at which the work (candidates + postings + 1 per word) reaches\n"
"`budget`. Returns (the index of the next word, the indexes of the words left).\n"
"With `memo` (a list: two dicts, young and old, word -> capsule, and the young one's\n"
"numbers) each such word's match set is kept (see struct memo), valid while `epoch`\n"
"stays, and brought up to date on its next use; the young generation turns old at\n"
"`memo_cap` words or 128 times as many numbers. With flag 1 (and a memo) a word that\n"
"no token contains is kept there too, as the 3-gram of it found missing (a str), and\n"
"answered by that gram's absence from `grams` until it appears. With flag 2 (and a\n"
"memo) the long-word cache is neither read nor written (the memo keeps the answer).\n"
"With flag 8 the counts are added four numbers at a time (the same counts). With\n"
"flag 16 a candidate token and a word of one byte per character are compared as\n"
"bytes in C instead of by PyUnicode_Find (the same answers). With flag 32 and `tcap`\n"
"(the numbering's token_cache(), or None) an ASCII word's probe grams are the strs of\n"
"the cache's gram table (the same lookups). Flag 64 is the caller's word that `short`\n"
"holds no word of 3 or more characters: it is not read (only such words look there).\n"
"With flag 128 and `tcap` a candidate token of a word of 4 or more characters is first\n"
"tested by its signature (a bit per 3-character substring, kept per id in `tcap` for\n"
"`items`): one lacking a bit of the word's is skipped unread (the same answers; ids\n"
"are never reused and an id's item never changes). With flag 256 (and a memo) the\n"
"caller vouches that every replacement or deletion of a list of `grams` bumps `epoch`\n"
"(the memo's numbering is the owner's current one): a kept word's gram list is then\n"
"not looked up again in `grams` while its memo's epoch is `epoch` (the same counts).\n"
"O(budget + limit).");

/* Set probe_gslot for a count_words call from the token cache capsule `tcap` (made
 * when it has none yet; defined with the token cache below). 0, or -1 with an error. */
static int probe_table_begin(PyObject *tcap, PyObject *grams);

/* count_words' flags. */
#define MEMO_ABSENT 1    /* absent words kept in the memo as their missing 3-gram */
#define MEMO_OWN_CACHE 2 /* with a memo, the long-word cache neither read nor written */
#define MEMO_KEEP_LEFT 4 /* ... but a long word left for its size kept in it */
#define ADD_UNROLLED 8   /* the byte/word counts added four numbers at a time */
#define FIND_BYTES 16    /* candidates of one byte per character verified as bytes */
#define PROBE_STRS 32    /* a new word's probe grams from the token cache's gram strs */
#define SHORT_LEN2 64    /* `short` holds no word of 3 or more characters: not read */
#define CAND_SIGS 128    /* candidates tested by their signatures first (token cache) */
#define MEMO_EPOCH_ONLY 256 /* a memo of this epoch keeps its gram list: no probe for it */

/* The candidate signatures of token cache `tcap` for item dict `items` (emptied first
 * if they were another dict's); NULL with an error set if `tcap` is not one. Defined
 * with the token cache below. */
static struct candsigs *cand_sigs_begin(PyObject *tcap, PyObject *items);

/* counts[src[j]] += m for j < k, in order. With ADD_UNROLLED, four numbers a step,
 * their indexes read before any of the four counts is written (a count's store may
 * alias src for the compiler, which otherwise reloads after every store): the same
 * statements in the same order, so the same counts (equal indexes included). */
#define ADD_COUNTS(T)                                                        \
    do {                                                                     \
        T *c = (T *)counts.buf;                                              \
        const T add = (T)m;                                                  \
        Py_ssize_t j = 0;                                                    \
        if (flags & ADD_UNROLLED) {                                          \
            for (; j + 4 <= k; j += 4) {                                     \
                const int32_t a0 = src[j], a1 = src[j + 1];                  \
                const int32_t a2 = src[j + 2], a3 = src[j + 3];              \
                c[a0] += add;                                                \
                c[a1] += add;                                                \
                c[a2] += add;                                                \
                c[a3] += add;                                                \
            }                                                                \
        }                                                                    \
        for (; j < k; j++) {                                                 \
            c[src[j]] += add;                                                \
        }                                                                    \
    } while (0)

static PyObject *
count_words(PyObject *self, PyObject *args)
{
    PyObject *words, *mults, *grams, *items, *vcache, *post, *skip, *shorts, *o_counts;
    PyObject *memo = Py_None, *tcap = Py_None;
    Py_ssize_t start, budget, limit, cache_size, n, np = 0, epoch = 0, memo_cap = 1;
    int flags = 0;
    if (!PyArg_ParseTuple(args, "O!O!nnnO!O!O!nO!O!O!On|nOnniO", &PyList_Type, &words,
                          &PyList_Type, &mults, &start, &budget, &limit, &PyDict_Type, &grams,
                          &PyDict_Type, &items, &PyDict_Type, &vcache, &cache_size,
                          &PyDict_Type, &post, &PyDict_Type, &skip, &PyDict_Type, &shorts,
                          &o_counts, &n, &np, &memo, &epoch, &memo_cap, &flags, &tcap)) {
        return NULL;
    }
    if (flags & ~(MEMO_ABSENT | MEMO_OWN_CACHE | MEMO_KEEP_LEFT | ADD_UNROLLED | FIND_BYTES |
                  PROBE_STRS | SHORT_LEN2 | CAND_SIGS | MEMO_EPOCH_ONLY)) {
        PyErr_SetString(PyExc_ValueError, "unknown flags");
        return NULL;
    }
    int absent_on = (flags & MEMO_ABSENT) != 0;
    if (memo == Py_None) {
        memo = NULL;
    } else if (!PyList_CheckExact(memo) || PyList_GET_SIZE(memo) != 3 ||
               !PyDict_CheckExact(PyList_GET_ITEM(memo, 0)) ||
               !PyDict_CheckExact(PyList_GET_ITEM(memo, 1)) ||
               !PyLong_CheckExact(PyList_GET_ITEM(memo, 2)) || memo_cap < 1) {
        PyErr_SetString(PyExc_TypeError,
                        "memo must be None or a list of two dicts and an int, cap >= 1");
        return NULL;
    }
    if (np < 0 || np > MAX_PLANES) {
        PyErr_SetString(PyExc_ValueError, "np out of range");
        return NULL;
    }
    if (!PyDict_CheckExact(grams) || !PyDict_CheckExact(items) || !PyDict_CheckExact(vcache) ||
        !PyDict_CheckExact(post) || !PyDict_CheckExact(skip) || !PyDict_CheckExact(shorts) ||
        cache_size < 1) {
        PyErr_SetString(PyExc_TypeError, "exact dicts and a cache size >= 1 expected");
        return NULL;
    }
    Py_ssize_t nw = PyList_GET_SIZE(words);
    /* limit sizes the buffers below (limit + 1 pointers and numbers, a table of at least
     * 2 * limit): past INT32_MAX (more than any set of int32 group numbers) their sizes
     * could wrap into a few bytes allocated and then written past. */
    if (PyList_GET_SIZE(mults) != nw || start < 0 || start > nw || limit < 0 || budget < 0 ||
        limit > INT32_MAX || (size_t)limit >= (size_t)PY_SSIZE_T_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "words/mults/start/limit/budget out of range");
        return NULL;
    }
    /* Every int multiplicity in [0, 2**31) before any word is counted, those before
     * `start` too (the wrapper's range test, which knobs._LEAN_MULT_CHECKS skips, reads
     * the whole list, and before the wrapper's type tests). */
    for (Py_ssize_t j = 0; j < nw; j++) {
        PyObject *mo = PyList_GET_ITEM(mults, j);
        if (!PyLong_CheckExact(mo)) continue; /* refused below from `start` on, else unread */
        int over = 0;
        long long m = PyLong_AsLongLongAndOverflow(mo, &over);
        if (m == -1 && PyErr_Occurred()) return NULL;
        if (over || m < 0 || m > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "multiplicities must be in [0, 2**31)");
            return NULL;
        }
    }
    /* Every word a str and every multiplicity an int before any is counted: a refused
     * call leaves counts and the memo as they were (the Python wrapper no longer tests
     * them with knobs._LEAN_WORD_CHECKS). */
    for (Py_ssize_t j = start; j < nw; j++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(words, j)) ||
            !PyLong_CheckExact(PyList_GET_ITEM(mults, j))) {
            PyErr_SetString(PyExc_TypeError, "words must be str and mults int");
            return NULL;
        }
    }
    if ((flags & PROBE_STRS) && tcap != Py_None && probe_table_begin(tcap, grams) < 0) {
        return NULL;
    }
    cand_sigs = NULL;
    if ((flags & CAND_SIGS) && tcap != Py_None && !(cand_sigs = cand_sigs_begin(tcap, items))) {
        if (PyErr_Occurred()) {
            probe_gslot = NULL;
            return NULL;
        }
    }
    Py_buffer counts;
    if (PyObject_GetBuffer(o_counts, &counts,
                           PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        probe_gslot = NULL;
        cand_sigs = NULL;
        PyErr_SetString(PyExc_ValueError, "counts: not a contiguous writable buffer");
        return NULL;
    }
    int width = counts.ndim == 1 && (np ? kind_ok(&counts, K_U64)
                                        : (kind_ok(&counts, K_U8) || kind_ok(&counts, K_U16) ||
                                           kind_ok(&counts, K_I64)))
                    ? (int)counts.itemsize
                    : 0;
    PyObject *left = NULL, *result = NULL;
    PyObject **lists = NULL;
    int32_t *buf = NULL, *table = NULL;
    if (!width) {
        PyErr_SetString(PyExc_ValueError, np ? "planes: not uint64"
                                             : "counts: not uint8, uint16 or int64");
        goto done;
    }
    if (check_aligned(&counts, np ? "planes" : "counts") < 0) goto done;
    if (n < 0 || (np ? LEN(counts) / np < NWORDS(n) : n > LEN(counts))) {
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
            /* (A word of 3 or more characters is never in a `short` of SHORT_LEN2.) */
            int in = flags & SHORT_LEN2 ? 0 : PyDict_Contains(shorts, w);
            if (in == 0) in = PyDict_Contains(skip, w);
            if (in < 0) goto done;
            leave = in;
        }
        const int32_t *src = buf; /* the distinct numbers to count, k of them */
        Py_ssize_t k = 0;
        uint64_t wmask = 0; /* w's signature bits, taken on first use (flag 128) */
        if (!leave && memo) {
            PyObject *marker;
            struct memo *mm = memo_find(memo, w, memo_cap, &marker);
            if (!mm && PyErr_Occurred()) goto done;
            if (marker) {
                /* An absent word stays absent while its missing gram stays missing: any
                 * token containing w would have put that gram in the dict. */
                PyObject *got = absent_on ? PyDict_GetItemWithError(grams, marker) : NULL;
                if (!got && PyErr_Occurred()) goto done;
                if (!got && absent_on) continue; /* nothing contains w, as below */
                if (memo_drop(memo, w) < 0) goto done; /* look it up again */
            }
            int r = mm ? memo_refresh(mm, w, wlen > 3, grams, items, post, epoch, limit, buf,
                                      table, cap, &work, (flags & FIND_BYTES) != 0, &wmask,
                                      (flags & MEMO_EPOCH_ONLY) != 0)
                       : 2;
            if (r < 0) goto done;
            if (r == 0) {
                k = memo_below(mm, n, buf, &src);
                goto add;
            }
            if (mm && memo_drop(memo, w) < 0) goto done; /* stale, or left from now on */
            leave = r == 1;
        }
        PyObject *ids = NULL; /* owned: the tokens containing w */
        PyObject *best = NULL; /* borrowed: the gram list ids come from */
        PyObject *missing = NULL; /* owned: the gram found missing, for the marker */
        Py_ssize_t at = 0;
        int looked_up = 0; /* ids verified by long_word_ids without the cache */
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
                best = ids;
                if (absent && memo && absent_on) missing = Py_NewRef(w);
            } else {
                int own = memo && (flags & MEMO_OWN_CACHE);
                ids = long_word_ids(grams, items, own ? NULL : vcache, cache_size, w, limit,
                                    &absent, &big, &work, &best, &at,
                                    memo && absent_on ? &missing : NULL,
                                    (flags & FIND_BYTES) != 0, &wmask);
                if (!ids && !absent && !big) goto done;
                looked_up = own && ids != NULL;
            }
            if (absent) { /* no token contains w */
                if (missing && memo_keep(memo, w, missing, memo_cap) < 0) goto done;
                continue;
            }
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
        Py_ssize_t end = best ? PyList_GET_SIZE(best) : 0;
        if (!leave && memo) {
            /* Kept from now on (`best` is held by the gram dict: no Python code runs in
             * this call). */
            PyObject *capsule = memo_new(w, at, best, end, epoch, lists, nl);
            if (!capsule) {
                Py_DECREF(ids);
                goto done;
            }
            struct memo *mm = PyCapsule_GetPointer(capsule, MEMO_NAME);
            int r = memo_read_tails(mm, limit, buf, table, cap, &work);
            if (r != 0) { /* 1 cannot happen (total < limit): left as before */
                Py_DECREF(capsule);
                if (r < 0) {
                    Py_DECREF(ids);
                    goto done;
                }
                leave = 1;
            } else {
                Py_DECREF(ids);
                if (memo_keep(memo, w, capsule, memo_cap) < 0) goto done; /* held */
                work += total;
                k = memo_below(mm, n, buf, &src);
                goto add;
            }
        }
        if (leave && looked_up && (flags & MEMO_KEEP_LEFT)) {
            /* Left for its size: the caller looks it up again (lookup_steps), and finds
             * this answer in the cache instead of verifying every candidate again.
             * `best` is still the gram dict's (no Python code ran since). */
            if (cache_keep(vcache, cache_size, w, best, PyList_GET_SIZE(best), ids) < 0) {
                Py_DECREF(ids);
                goto done;
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
        for (Py_ssize_t j = 0; j < nl; j++) {
            Py_buffer lb;
            if (posting_buffer(lists[j], &lb) < 0) goto done;
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
    add:
        if (np) {
            uint64_t *p = (uint64_t *)counts.buf;
            for (Py_ssize_t j = 0; j < k; j++) {
                bs_add(p + (Py_ssize_t)(src[j] >> 6) * np, (int)np,
                       (uint64_t)1 << (src[j] & 63), (uint64_t)m);
            }
        } else if (width == 1) {
            ADD_COUNTS(uint8_t);
        } else if (width == 2) {
            ADD_COUNTS(uint16_t);
        } else {
            ADD_COUNTS(int64_t);
        }
    }
    result = Py_BuildValue("nO", i, left);
done:
    probe_gslot = NULL;
    cand_sigs = NULL;
    PyMem_Free(table);
    PyMem_Free(buf);
    PyMem_Free(lists);
    Py_XDECREF(left);
    PyBuffer_Release(&counts);
    return result;
}

/* ------------------------------------------------------------------ masks */

PyDoc_STRVAR(text_masks_doc,
"text_masks(texts, pair_lo, pair_hi, lo, hi, start, by_kind=0) -> None\n\n"
"For each lower-cased text j of `texts`: lo[start + j] and hi[start + j] = the OR of\n"
"pair_lo / pair_hi (uint64, 129 * 129) at a * 129 + b over the text's character pairs\n"
"(a, b), the last character paired with a newline; code points above 127 count as 128.\n"
"What masks._text_masks computes with numpy. by_kind true (knobs._MASKS_BY_KIND): each\n"
"text read in a loop per string kind, not by PyUnicode_READ per character (the same\n"
"masks). O(total length).");

static PyObject *
text_masks(PyObject *self, PyObject *args)
{
    PyObject *texts, *o_plo, *o_phi, *o_lo, *o_hi;
    Py_ssize_t start;
    int masks_by_kind = 0;
    if (!PyArg_ParseTuple(args, "O!OOOOn|p", &PyList_Type, &texts, &o_plo, &o_phi, &o_lo, &o_hi,
                          &start, &masks_by_kind)) {
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
        if (check_aligned(&b[got], "masks and tables") < 0) {
            got++;
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
    for (Py_ssize_t j = 0; j < nt; j++) { /* every text checked before any mask is written */
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(texts, j))) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto done;
        }
    }
    for (Py_ssize_t j = 0; j < nt; j++) {
        PyObject *t = PyList_GET_ITEM(texts, j);
        int kind = PyUnicode_KIND(t);
        const void *data = PyUnicode_DATA(t);
        Py_ssize_t len = PyUnicode_GET_LENGTH(t);
        uint64_t ml = 0, mh = 0;
        Py_UCS4 prev = len ? PyUnicode_READ(kind, data, 0) : 0;
        unsigned a = prev > 128 ? 128 : prev;
        if (masks_by_kind && len) {
            /* The same pairs, the loop per kind (no kind switch and no end test per
             * character), then the last character with the newline. */
#define PAIR_LOOP(T)                                            \
            for (Py_ssize_t i = 1; i < len; i++) {              \
                Py_UCS4 c = ((const T *)data)[i];               \
                unsigned z = c > 128 ? 128 : c;                 \
                ml |= plo[a * 129 + z];                         \
                mh |= phi[a * 129 + z];                         \
                a = z;                                          \
            }
            if (kind == PyUnicode_1BYTE_KIND) {
                PAIR_LOOP(Py_UCS1)
            } else if (kind == PyUnicode_2BYTE_KIND) {
                PAIR_LOOP(Py_UCS2)
            } else {
                PAIR_LOOP(Py_UCS4)
            }
#undef PAIR_LOOP
            ml |= plo[a * 129 + '\n'];
            mh |= phi[a * 129 + '\n'];
        } else {
        for (Py_ssize_t i = 1; i <= len; i++) {
            Py_UCS4 c = i < len ? PyUnicode_READ(kind, data, i) : '\n';
            unsigned z = c > 128 ? 128 : c;
            ml |= plo[a * 129 + z];
            mh |= phi[a * 129 + z];
            a = z;
        }
        }
        lo[start + j] = ml;
        hi[start + j] = mh;
    }
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}


/* The planes buffer, checked: uint64, writable, np in [1, MAX_PLANES], room for
 * `words` words of groups. */
static int
get_planes(PyObject *o, Py_buffer *b, Py_ssize_t np, Py_ssize_t words, int writable)
{
    if (np < 1 || np > MAX_PLANES) {
        PyErr_SetString(PyExc_ValueError, "np out of range");
        return -1;
    }
    if (get(o, b, K_U64, writable, "planes") < 0) return -1;
    if (words < 0 || LEN(*b) / np < words) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_ValueError, "planes too short");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(bits_add_sparse_doc,
"bits_add_sparse(planes, np, xbits, gids, lo, hi, n, m) -> None\n\n"
"Add m to the count of each distinct group number 0 <= g < n of gids[lo:hi] (int32),\n"
"once: bit g of the bitset xbits (uint64) marks a group added already, and is set\n"
"(clear it with bits_unmark once the whole set is added). O((hi - lo) * np) at worst,\n"
"about 2 (hi - lo) plane words (a single bit's carry stops early).");

static PyObject *
bits_add_sparse(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_x, *o_g;
    Py_ssize_t np, lo, hi, n;
    unsigned long long m;
    if (!PyArg_ParseTuple(args, "OnOOnnnK", &o_p, &np, &o_x, &o_g, &lo, &hi, &n, &m)) {
        return NULL;
    }
    Py_buffer pb, xb, gb;
    PyObject *result = NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n out of range");
        return NULL;
    }
    if (get_planes(o_p, &pb, np, NWORDS(n), 1) < 0) return NULL;
    if (get(o_x, &xb, K_U64, 1, "xbits") < 0) goto e1;
    if (get(o_g, &gb, K_I32, 0, "gids") < 0) goto e2;
    if (NWORDS(n) > LEN(xb) || lo < 0 || hi < lo || hi > LEN(gb)) {
        PyErr_SetString(PyExc_ValueError, "n/lo/hi out of range");
        goto done;
    }
    {
        uint64_t *p = pb.buf, *x = xb.buf;
        const int32_t *g = gb.buf;
        int pn = (int)np;
        for (Py_ssize_t i = lo; i < hi; i++) {
            int32_t num = g[i];
            if (num < 0 || num >= n) continue;
            uint64_t bit = (uint64_t)1 << (num & 63);
            if (x[num >> 6] & bit) continue;
            x[num >> 6] |= bit;
            bs_add(p + (Py_ssize_t)(num >> 6) * np, pn, bit, m);
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&gb);
e2:
    PyBuffer_Release(&xb);
e1:
    PyBuffer_Release(&pb);
    return result;
}

PyDoc_STRVAR(bits_unmark_doc,
"bits_unmark(xbits, gids, lo, hi, n) -> None\n\n"
"Zero the words of the bitset xbits (uint64) that hold the group numbers 0 <= g < n\n"
"of gids[lo:hi] (int32): undoes bits_add_sparse's marks. O(hi - lo).");

static PyObject *
bits_unmark(PyObject *self, PyObject *args)
{
    PyObject *o_x, *o_g;
    Py_ssize_t lo, hi, n;
    if (!PyArg_ParseTuple(args, "OOnnn", &o_x, &o_g, &lo, &hi, &n)) return NULL;
    Py_buffer xb, gb;
    PyObject *result = NULL;
    if (get(o_x, &xb, K_U64, 1, "xbits") < 0) return NULL;
    if (get(o_g, &gb, K_I32, 0, "gids") < 0) goto e1;
    if (n < 0 || NWORDS(n) > LEN(xb) || lo < 0 || hi < lo || hi > LEN(gb)) {
        PyErr_SetString(PyExc_ValueError, "n/lo/hi out of range");
        goto done;
    }
    {
        uint64_t *x = xb.buf;
        const int32_t *g = gb.buf;
        for (Py_ssize_t i = lo; i < hi; i++) {
            int32_t num = g[i];
            if (num >= 0 && num < n) x[num >> 6] = 0;
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&gb);
e1:
    PyBuffer_Release(&xb);
    return result;
}

/* The largest count among the lanes `valid` of one word's planes `pw`. */
static inline uint64_t
word_max(const uint64_t *pw, int np, uint64_t valid)
{
    uint64_t cand = valid, c = 0;
    if (!cand) return 0;
    for (int j = np - 1; j >= 0; j--) {
        uint64_t t = cand & pw[j];
        if (t) {
            cand = t;
            c |= (uint64_t)1 << j;
        }
    }
    return c;
}

/* bits_add_dense's loop; inlined with a constant `pn` (1 to 16) the planes of a word stay
 * in registers and a set of multiplicity 1 is added branch-free through every plane. */
static inline __attribute__((always_inline)) void
add_dense_fixed(uint64_t *p, int pn, Py_ssize_t wlo, Py_ssize_t whi, const uint64_t **bufs,
                const uint64_t *mults, Py_ssize_t nsets, uint16_t *wmax, Py_ssize_t n)
{
    uint64_t r[MAX_PLANES];
    for (Py_ssize_t w = wlo; w < whi; w++) {
        uint64_t *pw = p + w * pn;
        for (int k = 0; k < pn; k++) r[k] = pw[k];
        for (Py_ssize_t s = 0; s < nsets; s++) {
            uint64_t x = bufs[s][w];
            if (mults[s] == 1) {
                for (int k = 0; k < pn; k++) {
                    uint64_t t = r[k] & x;
                    r[k] ^= x;
                    x = t;
                }
            } else {
                bs_add(r, pn, x, mults[s]);
            }
        }
        for (int k = 0; k < pn; k++) pw[k] = r[k];
        if (wmax) wmax[w] = (uint16_t)word_max(r, pn, below_n(w, n));
    }
}

/* A dense set of multiplicity up to this is added as that many sets of multiplicity 1
 * through the carry-save blocks (a few operations a copy, the word read from L1), beyond
 * it by bs_add's carries (branches, the planes through memory). */
#define CSA_REPEAT 8

/* A full adder over 64 lanes: *s = a + b + c's low bit, *c2 = its carry. */
#define FULL_ADD(s, c2, a, b, c)                                                 \
    do {                                                                         \
        uint64_t fa_a = (a), fa_b = (b), fa_c = (c), fa_x = fa_a ^ fa_b;         \
        (c2) = (fa_a & fa_b) | (fa_x & fa_c);                                    \
        (s) = fa_x ^ fa_c;                                                       \
    } while (0)

/* Add the 3-bit number b0 + 2 b1 + 4 b2 (per lane) into the planes r (mod 2 ** pn, as
 * adding its parts one by one would). The carry past the top plane is dropped. */
static inline __attribute__((always_inline)) void
add3_planes(uint64_t *r, int pn, uint64_t b0, uint64_t b1, uint64_t b2)
{
    uint64_t c = r[0] & b0;
    r[0] ^= b0;
    if (pn > 1) FULL_ADD(r[1], c, r[1], b1, c);
    if (pn > 2) FULL_ADD(r[2], c, r[2], b2, c);
    for (int k = 3; k < pn; k++) {
        uint64_t t = r[k] & c;
        r[k] ^= c;
        c = t;
    }
}

/* add_dense_fixed's sum by carry-save blocks: the sets of multiplicity 1 (`ones`; the
 * caller lists a set of a small multiplicity m there m times) seven at a time reduced
 * to a 3-bit number per lane by four full adders, added to the planes once (about 3
 * word operations per set instead of 3 per plane and set), four to six left as one
 * such block, fewer three at a time or one by one, then the other sets (`others`, any multiplicity) as
 * add_dense_fixed adds them. Exact, and the same result: addition mod 2 ** pn in any
 * grouping. The planes of a word stay in registers with a constant `pn`. */
static inline __attribute__((always_inline)) void
add_dense_csa(uint64_t *p, int pn, Py_ssize_t wlo, Py_ssize_t whi, const uint64_t **ones,
              Py_ssize_t nones, const uint64_t **others, const uint64_t *omults,
              Py_ssize_t nothers, uint16_t *wmax, Py_ssize_t n, int regs)
{
    uint64_t r[MAX_PLANES];
    for (Py_ssize_t w = wlo; w < whi; w++) {
        uint64_t *pw = p + w * pn;
        for (int k = 0; k < pn; k++) r[k] = pw[k];
        Py_ssize_t s = 0;
        for (; s + 7 <= nones; s += 7) {
            uint64_t s1, c1, s2, c2, b0, c3, b1, b2;
            FULL_ADD(s1, c1, ones[s][w], ones[s + 1][w], ones[s + 2][w]);
            FULL_ADD(s2, c2, s1, ones[s + 3][w], ones[s + 4][w]);
            FULL_ADD(b0, c3, s2, ones[s + 5][w], ones[s + 6][w]);
            FULL_ADD(b1, b2, c1, c2, c3);
            add3_planes(r, pn, b0, b1, b2);
        }
        if (nones - s >= 4) { /* 4 to 6 left: one block, the missing inputs zero */
            uint64_t s1, c1, b0, c2, c3 = 0, b1, b2;
            FULL_ADD(s1, c1, ones[s][w], ones[s + 1][w], ones[s + 2][w]);
            if (nones - s == 4) {
                uint64_t d = ones[s + 3][w];
                b0 = s1 ^ d;
                c2 = s1 & d;
            } else {
                FULL_ADD(b0, c2, s1, ones[s + 3][w], ones[s + 4][w]);
                if (nones - s == 6) {
                    uint64_t f = ones[s + 5][w];
                    c3 = b0 & f;
                    b0 ^= f;
                }
            }
            FULL_ADD(b1, b2, c1, c2, c3);
            add3_planes(r, pn, b0, b1, b2);
            s = nones;
        }
        for (; s + 3 <= nones; s += 3) {
            uint64_t b0, b1;
            FULL_ADD(b0, b1, ones[s][w], ones[s + 1][w], ones[s + 2][w]);
            add3_planes(r, pn, b0, b1, 0);
        }
        for (; s < nones; s++) {
            uint64_t x = ones[s][w];
            for (int k = 0; k < pn; k++) {
                uint64_t t = r[k] & x;
                r[k] ^= x;
                x = t;
            }
        }
        if (!regs) { /* the loop before (knobs._CSA_REGS off) */
            for (Py_ssize_t o = 0; o < nothers; o++) bs_add(r, pn, others[o][w], omults[o]);
        } else if (nothers) {
            /* bs_add indexes the planes with a variable: on a copy, so that `r` is
             * indexed by constants only and stays in registers (else the compiler keeps
             * it on the stack, and the copy to `pw` below, two scalar stores read back
             * as one 16-byte load, stalls on store forwarding: 40% of this loop) */
            uint64_t tmp[MAX_PLANES];
            for (int k = 0; k < pn; k++) tmp[k] = r[k];
            for (Py_ssize_t o = 0; o < nothers; o++) bs_add(tmp, pn, others[o][w], omults[o]);
            for (int k = 0; k < pn; k++) r[k] = tmp[k];
        }
        for (int k = 0; k < pn; k++) pw[k] = r[k];
        if (wmax) wmax[w] = (uint16_t)word_max(r, pn, below_n(w, n));
    }
}

PyDoc_STRVAR(bits_add_dense_doc,
"bits_add_dense(planes, np, wlo, whi, sets, mults, csa=False, wmax=None, n=0, regs=True)\n"
"    -> None\n\n"
"For the words wlo..whi: add each bitset of `sets` (uint64, at least whi words) its\n"
"multiplicity times into the planes, the planes of a word loaded once for all sets.\n"
"O((whi - wlo) * len(sets) * np): three word operations per plane, set and word; with\n"
"csa, the sets of multiplicity 1 seven at a time through carry-save adders (one of\n"
"multiplicity m <= 8 as m such sets), about three word operations per set and word\n"
"plus 5 np per seven sets (the same sums).\n"
"With wmax (uint16, at least whi words; np <= 16), wmax[w] = the largest count of\n"
"the groups below n in word w afterwards, for the words wlo..whi.\n"
"regs=False: the csa loop as it was before it kept a word's planes in registers\n"
"(knobs._CSA_REGS; the same sums).");

static PyObject *
bits_add_dense(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_sets, *o_mults;
    Py_ssize_t np, wlo, whi;
    int csa = 0;
    PyObject *o_w = Py_None;
    Py_ssize_t n = 0;
    int regs = 1;
    if (!PyArg_ParseTuple(args, "OnnnO!O!|pOnp", &o_p, &np, &wlo, &whi, &PyList_Type, &o_sets,
                          &PyList_Type, &o_mults, &csa, &o_w, &n, &regs)) {
        return NULL;
    }
    Py_ssize_t nsets = PyList_GET_SIZE(o_sets);
    if (PyList_GET_SIZE(o_mults) != nsets || wlo < 0 || whi < wlo || n < 0) {
        PyErr_SetString(PyExc_ValueError, "sets/mults/wlo/whi/n out of range");
        return NULL;
    }
    Py_buffer pb, wb;
    uint16_t *wmax = NULL;
    if (o_w != Py_None) {
        if (np > 16) {
            PyErr_SetString(PyExc_ValueError, "wmax needs np <= 16");
            return NULL;
        }
        if (get(o_w, &wb, K_U16, 1, "wmax") < 0) return NULL;
        if (LEN(wb) < whi) {
            PyBuffer_Release(&wb);
            PyErr_SetString(PyExc_ValueError, "wmax too short");
            return NULL;
        }
        wmax = wb.buf;
    }
    if (get_planes(o_p, &pb, np, whi, 1) < 0) {
        if (wmax) PyBuffer_Release(&wb);
        return NULL;
    }
    Py_buffer *sets = PyMem_Calloc(nsets ? nsets : 1, sizeof(Py_buffer));
    const uint64_t **bufs = PyMem_Calloc(nsets ? nsets : 1, sizeof(uint64_t *));
    uint64_t *mults = PyMem_Calloc(nsets ? nsets : 1, sizeof(uint64_t));
    /* With csa: the sets of multiplicity 1 to CSA_REPEAT first (`nones`; a set of
     * multiplicity m there m times), then the others, in order. */
    const uint64_t **split = PyMem_Calloc(nsets ? nsets * CSA_REPEAT : 1, sizeof(uint64_t *));
    uint64_t *smults = PyMem_Calloc(nsets ? nsets : 1, sizeof(uint64_t));
    Py_ssize_t got = 0, nones = 0;
    PyObject *result = NULL;
    if (!sets || !bufs || !mults || !split || !smults) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nsets; got++) {
        mults[got] = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(o_mults, got));
        if (PyErr_Occurred()) goto done;
        if (get(PyList_GET_ITEM(o_sets, got), &sets[got], K_U64, 0, "set") < 0) goto done;
        if (LEN(sets[got]) < whi) {
            got++;
            PyErr_SetString(PyExc_ValueError, "a set shorter than whi words");
            goto done;
        }
        bufs[got] = sets[got].buf;
    }
    if (csa) {
        Py_ssize_t no = 0;
        for (Py_ssize_t s = 0; s < nsets; s++) {
            if (mults[s] <= CSA_REPEAT) {
                for (uint64_t k = 0; k < mults[s]; k++) split[nones++] = bufs[s];
            }
        }
        for (Py_ssize_t s = 0; s < nsets; s++) {
            if (mults[s] > CSA_REPEAT) {
                split[nones + no] = bufs[s];
                smults[no++] = mults[s];
            }
        }
        switch ((int)np) {
/* `regs` a constant in each copy: the one with it set never indexes r by a variable */
#define CSA_CASE(PN)                                                                     \
    case PN:                                                                             \
        if (regs) {                                                                      \
            add_dense_csa(pb.buf, PN, wlo, whi, split, nones, split + nones, smults, no, \
                          wmax, n, 1);                                                   \
        } else {                                                                         \
            add_dense_csa(pb.buf, PN, wlo, whi, split, nones, split + nones, smults, no, \
                          wmax, n, 0);                                                   \
        }                                                                                \
        break;
            CSA_CASE(1) CSA_CASE(2) CSA_CASE(3) CSA_CASE(4) CSA_CASE(5)
            CSA_CASE(6) CSA_CASE(7) CSA_CASE(8) CSA_CASE(9) CSA_CASE(10)
            CSA_CASE(11) CSA_CASE(12) CSA_CASE(13) CSA_CASE(14) CSA_CASE(15)
            CSA_CASE(16)
#undef CSA_CASE
        default:
            add_dense_csa(pb.buf, (int)np, wlo, whi, split, nones, split + nones, smults, no,
                          wmax, n, regs);
        }
    } else {
        switch ((int)np) {
#define DENSE_CASE(PN)                                                           \
    case PN:                                                                     \
        add_dense_fixed(pb.buf, PN, wlo, whi, bufs, mults, nsets, wmax, n);      \
        break;
            DENSE_CASE(1) DENSE_CASE(2) DENSE_CASE(3) DENSE_CASE(4) DENSE_CASE(5)
            DENSE_CASE(6) DENSE_CASE(7) DENSE_CASE(8) DENSE_CASE(9) DENSE_CASE(10)
            DENSE_CASE(11) DENSE_CASE(12) DENSE_CASE(13) DENSE_CASE(14) DENSE_CASE(15)
            DENSE_CASE(16)
#undef DENSE_CASE
        default:
            add_dense_fixed(pb.buf, (int)np, wlo, whi, bufs, mults, nsets, wmax, n);
        }
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t s = 0; s < got; s++) PyBuffer_Release(&sets[s]);
    PyMem_Free(sets);
    PyMem_Free(bufs);
    PyMem_Free(mults);
    PyMem_Free(split);
    PyMem_Free(smults);
    PyBuffer_Release(&pb);
    if (wmax) PyBuffer_Release(&wb);
    return result;
}

PyDoc_STRVAR(bits_maxima_doc,
"bits_maxima(planes, np, n, chunk, c0, c1, out) -> None\n\n"
"out[i] (int64) = the largest count among the groups i * chunk .. (i + 1) * chunk - 1\n"
"below n, for the chunks c0..c1 (chunk a positive multiple of 64).\n"
"O((c1 - c0) * chunk / 64 * np).");

static PyObject *
bits_maxima(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_out;
    Py_ssize_t np, n, chunk, c0, c1;
    if (!PyArg_ParseTuple(args, "OnnnnnO", &o_p, &np, &n, &chunk, &c0, &c1, &o_out)) {
        return NULL;
    }
    if (n < 0 || chunk <= 0 || chunk % 64 || c0 < 0 || c1 < c0 ||
        (c1 > 0 && (c1 - 1) > (n ? (n - 1) / chunk : -1))) {
        PyErr_SetString(PyExc_ValueError, "n/chunk/c0/c1 out of range");
        return NULL;
    }
    Py_buffer pb, ob;
    if (get_planes(o_p, &pb, np, NWORDS(n), 0) < 0) return NULL;
    if (get(o_out, &ob, K_I64, 1, "out") < 0) {
        PyBuffer_Release(&pb);
        return NULL;
    }
    PyObject *result = NULL;
    if (LEN(ob) < c1) {
        PyErr_SetString(PyExc_ValueError, "out too short");
        goto done;
    }
    {
        const uint64_t *p = pb.buf;
        int64_t *out = ob.buf;
        Py_ssize_t per = chunk / 64, last = NWORDS(n);
        for (Py_ssize_t i = c0; i < c1; i++) {
            uint64_t most = 0;
            Py_ssize_t hiw = (i + 1) * per < last ? (i + 1) * per : last;
            for (Py_ssize_t w = i * per; w < hiw; w++) {
                uint64_t c = word_max(p + w * np, (int)np, below_n(w, n));
                if (c > most) most = c;
            }
            out[i] = (int64_t)most;
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
    return result;
}

PyDoc_STRVAR(bits_word_maxima_doc,
"bits_word_maxima(planes, np, n, wlo, whi, wmax) -> None\n\n"
"wmax[w] (uint16) = the largest count among the groups below n of word w (64 groups),\n"
"for the words wlo..whi (np <= 16). O((whi - wlo) * np).");

static PyObject *
bits_word_maxima(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_w;
    Py_ssize_t np, n, wlo, whi;
    if (!PyArg_ParseTuple(args, "OnnnnO", &o_p, &np, &n, &wlo, &whi, &o_w)) return NULL;
    if (n < 0 || wlo < 0 || whi < wlo || whi > NWORDS(n) || np > 16) {
        PyErr_SetString(PyExc_ValueError, "n/wlo/whi/np out of range");
        return NULL;
    }
    Py_buffer pb, wb;
    if (get_planes(o_p, &pb, np, whi, 0) < 0) return NULL;
    if (get(o_w, &wb, K_U16, 1, "wmax") < 0) {
        PyBuffer_Release(&pb);
        return NULL;
    }
    PyObject *result = NULL;
    if (LEN(wb) < whi) {
        PyErr_SetString(PyExc_ValueError, "wmax too short");
        goto done;
    }
    {
        const uint64_t *p = pb.buf;
        uint16_t *wmax = wb.buf;
        for (Py_ssize_t w = wlo; w < whi; w++) {
            wmax[w] = (uint16_t)word_max(p + w * np, (int)np, below_n(w, n));
        }
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&wb);
    PyBuffer_Release(&pb);
    return result;
}

PyDoc_STRVAR(bits_select_doc,
"bits_select(planes, np, c, glo, ghi, n, out, wmax=None) -> int\n\n"
"The group numbers g in glo..ghi, below n, whose count is c, ascending, written to out\n"
"(int64, at least ghi - glo); returns how many. O((ghi - glo) / 64 * np + found).\n"
"With wmax (uint16, bits_word_maxima's, over at least the words up to ghi) a word\n"
"whose largest count is below c is skipped unread: O((ghi - glo) / 64 + words read).");

static PyObject *
bits_select(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_out, *o_w = Py_None;
    Py_ssize_t np, glo, ghi, n;
    unsigned long long c;
    if (!PyArg_ParseTuple(args, "OnKnnnO|O", &o_p, &np, &c, &glo, &ghi, &n, &o_out, &o_w)) {
        return NULL;
    }
    if (n < 0 || glo < 0 || ghi < glo) {
        PyErr_SetString(PyExc_ValueError, "glo/ghi/n out of range");
        return NULL;
    }
    if (ghi > n) ghi = n;
    if (glo > ghi) glo = ghi;
    Py_buffer pb, ob, wb;
    const uint16_t *wmax = NULL;
    if (o_w != Py_None) {
        if (get(o_w, &wb, K_U16, 0, "wmax") < 0) return NULL;
        if (LEN(wb) < NWORDS(ghi)) {
            PyBuffer_Release(&wb);
            PyErr_SetString(PyExc_ValueError, "wmax too short");
            return NULL;
        }
        wmax = wb.buf;
    }
    PyObject *result = NULL;
    if (get_planes(o_p, &pb, np, NWORDS(ghi), 0) < 0) goto e1;
    if (get(o_out, &ob, K_I64, 1, "out") < 0) {
        PyBuffer_Release(&pb);
        goto e1;
    }
    if (LEN(ob) < ghi - glo) {
        PyErr_SetString(PyExc_ValueError, "out too short");
        goto done;
    }
    {
        const uint64_t *p = pb.buf;
        int64_t *out = ob.buf;
        Py_ssize_t k = 0;
        int pn = (int)np;
        if (glo < ghi && (pn >= 64 || (c >> pn) == 0)) {
            for (Py_ssize_t w = glo >> 6; w <= (ghi - 1) >> 6; w++) {
                if (wmax && wmax[w] < c) continue;
                const uint64_t *pw = p + w * np;
                uint64_t eq = below_n(w, ghi) & ~below_n(w, glo);
                for (int j = 0; eq && j < pn; j++) {
                    eq &= ((c >> j) & 1) ? pw[j] : ~pw[j];
                }
                while (eq) {
                    out[k++] = (int64_t)(w * 64 + __builtin_ctzll(eq));
                    eq &= eq - 1;
                }
            }
        }
        result = PyLong_FromSsize_t(k);
    }
done:
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
e1:
    if (wmax) PyBuffer_Release(&wb);
    return result;
}

PyDoc_STRVAR(bits_count_doc,
"bits_count(planes, np, g) -> int\n\n"
"The count of group g. O(np).");

static PyObject *
bits_count(PyObject *self, PyObject *args)
{
    PyObject *o_p;
    Py_ssize_t np, g;
    if (!PyArg_ParseTuple(args, "Onn", &o_p, &np, &g)) return NULL;
    if (g < 0) {
        PyErr_SetString(PyExc_ValueError, "g out of range");
        return NULL;
    }
    Py_buffer pb;
    if (get_planes(o_p, &pb, np, g / 64 + 1, 0) < 0) return NULL;
    const uint64_t *pw = (const uint64_t *)pb.buf + (g >> 6) * np;
    unsigned long long c = 0;
    for (Py_ssize_t j = 0; j < np; j++) c |= ((pw[j] >> (g & 63)) & 1) << j;
    PyBuffer_Release(&pb);
    return PyLong_FromUnsignedLongLong(c);
}

/* Set bit g of the bitset b for each group number 0 <= g < n of g[lo:hi]: the loop
 * of bits_set, bits_join and bits_join_slice. O(hi - lo). */
static inline void
set_group_bits(uint64_t *b, const int32_t *g, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n)
{
    for (Py_ssize_t i = lo; i < hi; i++) {
        int32_t num = g[i];
        if (num >= 0 && num < n) b[num >> 6] |= (uint64_t)1 << (num & 63);
    }
}

PyDoc_STRVAR(bits_set_doc,
"bits_set(bits, gids, lo, hi, n) -> None\n\n"
"Set bit g of the bitset bits (uint64) for each group number 0 <= g < n of\n"
"gids[lo:hi] (int32). O(hi - lo).");

static PyObject *
bits_set(PyObject *self, PyObject *args)
{
    PyObject *o_b, *o_g;
    Py_ssize_t lo, hi, n;
    if (!PyArg_ParseTuple(args, "OOnnn", &o_b, &o_g, &lo, &hi, &n)) return NULL;
    Py_buffer bb, gb;
    if (get(o_b, &bb, K_U64, 1, "bits") < 0) return NULL;
    if (get(o_g, &gb, K_I32, 0, "gids") < 0) {
        PyBuffer_Release(&bb);
        return NULL;
    }
    PyObject *result = NULL;
    if (n < 0 || NWORDS(n) > LEN(bb) || lo < 0 || hi < lo || hi > LEN(gb)) {
        PyErr_SetString(PyExc_ValueError, "n/lo/hi out of range");
        goto done;
    }
    set_group_bits(bb.buf, gb.buf, lo, hi, n);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&gb);
    PyBuffer_Release(&bb);
    return result;
}

PyDoc_STRVAR(bits_join_doc,
"bits_join(lists, n, bits, ahead=0) -> None\n\n"
"Set bit g of the bitset bits (uint64, at least ceil(n / 64) words) for every group\n"
"number 0 <= g < n of the posting lists (array('i') each); with ahead > 0 (at most 16\n"
"used) the next lists' buffers are held and prefetched meanwhile. O(total postings).");

static PyObject *
bits_join(PyObject *self, PyObject *args)
{
    PyObject *lists, *o_b;
    Py_ssize_t n, ahead = 0;
    if (!PyArg_ParseTuple(args, "O!nO|n", &PyList_Type, &lists, &n, &o_b, &ahead)) return NULL;
    Py_buffer bb;
    if (get(o_b, &bb, K_U64, 1, "bits") < 0) return NULL;
    PyObject *result = NULL;
    if (n < 0 || NWORDS(n) > LEN(bb)) {
        PyErr_SetString(PyExc_ValueError, "n out of range");
        goto done;
    }
    /* With `ahead`, the buffers of the next `ahead` lists are held and their first
     * lines prefetched while a list is joined (short lists: a miss each otherwise).
     * No Python code runs here, so no list is resized while its buffer is held. */
    enum { RING = 17 };
    if (ahead < 0) ahead = 0;
    if (ahead > RING - 1) ahead = RING - 1;
    Py_buffer ring[RING];
    Py_ssize_t nl = PyList_GET_SIZE(lists), got = 0;
    for (Py_ssize_t j = 0; j < nl; j++) {
        while (got < nl && got <= j + ahead) {
            Py_buffer *next = &ring[got % RING];
            if (get(PyList_GET_ITEM(lists, got), next, K_I32, 0, "posting list") < 0) {
                for (Py_ssize_t h = j; h < got; h++) PyBuffer_Release(&ring[h % RING]);
                goto done;
            }
            if (ahead) {
                __builtin_prefetch(next->buf);
                __builtin_prefetch((const char *)next->buf + 64);
            }
            got++;
        }
        Py_buffer *lst = &ring[j % RING];
        set_group_bits(bb.buf, lst->buf, 0, LEN(*lst), n);
        PyBuffer_Release(lst);
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bb);
    return result;
}

PyDoc_STRVAR(bits_join_slice_doc,
"bits_join_slice(lst, start, stop, n, bits) -> None\n\n"
"bits_join of lst[start:stop] (array('i')) alone, read in place (no copy): set bit g\n"
"of bits (uint64, at least ceil(n / 64) words) for every 0 <= g < n of the slice.\n"
"O(stop - start).");

static PyObject *
bits_join_slice(PyObject *self, PyObject *args)
{
    PyObject *o_l, *o_b;
    Py_ssize_t start, stop, n;
    if (!PyArg_ParseTuple(args, "OnnnO", &o_l, &start, &stop, &n, &o_b)) return NULL;
    Py_buffer lst, bb;
    if (get(o_l, &lst, K_I32, 0, "posting list") < 0) return NULL;
    if (get(o_b, &bb, K_U64, 1, "bits") < 0) {
        PyBuffer_Release(&lst);
        return NULL;
    }
    PyObject *result = NULL;
    if (n < 0 || NWORDS(n) > LEN(bb) || start < 0 || stop < start || stop > LEN(lst)) {
        PyErr_SetString(PyExc_ValueError, "n, start or stop out of range");
        goto done;
    }
    set_group_bits(bb.buf, lst.buf, start, stop, n);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bb);
    PyBuffer_Release(&lst);
    return result;
}

PyDoc_STRVAR(lists_of_ids_doc,
"lists_of_ids(ids, start, stop, byid, items, post, lists, lens, ahead=0) -> int\n\n"
"The posting lists of the token ids ids[start:stop] (a list of ints; stop clamped to\n"
"its length) appended to lists, their lengths to lens, in order; returns the sum of\n"
"those lengths. A token's list is byid[id] when id < len(byid) and that is not None,\n"
"else post[items[id]] (ids missing from items or post skipped); empty lists and empty\n"
"items are skipped (the same as filter(None, map(post.get, filter(None,\n"
"map(items.get, ids))))). O(stop - start): per id a list slot and the array's size,\n"
"or two dict lookups without a slot. With ahead > 0 (at most 16 used) the ids, slots\n"
"and arrays that many ids ahead are prefetched (three stages).");

static PyObject *
lists_of_ids(PyObject *self, PyObject *args)
{
    PyObject *ids, *byid, *items, *post, *lists, *lens;
    Py_ssize_t start, stop, ahead = 0;
    if (!PyArg_ParseTuple(args, "O!nnO!O!O!O!O!|n", &PyList_Type, &ids, &start, &stop,
                          &PyList_Type, &byid, &PyDict_Type, &items, &PyDict_Type, &post,
                          &PyList_Type, &lists, &PyList_Type, &lens, &ahead)) {
        return NULL;
    }
    if (lists == ids || lens == ids || lists == byid || lens == byid) {
        PyErr_SetString(PyExc_ValueError, "lists and lens must be other lists");
        return NULL;
    }
    if (start < 0) start = 0;
    /* at most 16 ahead (as bits_join): k + 3 * ahead must not overflow */
    if (ahead < 0) ahead = 0;
    if (ahead > 16) ahead = 16;
    long long total = 0;
    /* Sizes re-read each time: no Python code runs here, but appends may reallocate. */
    for (Py_ssize_t k = start; k < stop && k < PyList_GET_SIZE(ids); k++) {
        PyObject *id = PyList_GET_ITEM(ids, k);
        PyObject *lst = NULL;
        if (ahead > 0) {
            /* Three stages ahead: the id's int object, its slot, the slot's array. */
            Py_ssize_t size = PyList_GET_SIZE(ids), nslots = PyList_GET_SIZE(byid);
            if (k + 3 * ahead < size) __builtin_prefetch(PyList_GET_ITEM(ids, k + 3 * ahead));
            if (k + 2 * ahead < size) {
                PyObject *o = PyList_GET_ITEM(ids, k + 2 * ahead);
                if (PyLong_CheckExact(o)) {
                    Py_ssize_t i = PyLong_AsSsize_t(o);
                    if (i == -1 && PyErr_Occurred()) PyErr_Clear();
                    if (i >= 0 && i < nslots) __builtin_prefetch(&PyList_GET_ITEM(byid, i));
                }
            }
            if (k + ahead < size) {
                PyObject *o = PyList_GET_ITEM(ids, k + ahead);
                if (PyLong_CheckExact(o)) {
                    Py_ssize_t i = PyLong_AsSsize_t(o);
                    if (i == -1 && PyErr_Occurred()) PyErr_Clear();
                    if (i >= 0 && i < nslots) __builtin_prefetch(PyList_GET_ITEM(byid, i));
                }
            }
        }
        if (PyLong_CheckExact(id)) {
            Py_ssize_t i = PyLong_AsSsize_t(id);
            if (i == -1 && PyErr_Occurred()) {
                PyErr_Clear(); /* out of range: not a slot; looked up below */
            } else if (i >= 0 && i < PyList_GET_SIZE(byid)) {
                lst = PyList_GET_ITEM(byid, i);
                if (lst == Py_None) lst = NULL;
            }
        }
        if (!lst) {
            PyObject *item = PyDict_GetItemWithError(items, id);
            if (!item) {
                if (PyErr_Occurred()) return NULL;
                continue;
            }
            if (!PyUnicode_CheckExact(item)) {
                PyErr_SetString(PyExc_TypeError, "vocabulary items must be str");
                return NULL;
            }
            if (PyUnicode_GET_LENGTH(item) == 0) continue;
            lst = PyDict_GetItemWithError(post, item);
            if (!lst) {
                if (PyErr_Occurred()) return NULL;
                continue;
            }
        }
        if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
            PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
            return NULL;
        }
        Py_ssize_t len = Py_SIZE(lst);
        if (len == 0) continue;
        PyObject *n_obj = PyLong_FromSsize_t(len);
        if (!n_obj) return NULL;
        if (PyList_Append(lists, lst) < 0 || PyList_Append(lens, n_obj) < 0) {
            Py_DECREF(n_obj);
            return NULL;
        }
        Py_DECREF(n_obj);
        total += len;
    }
    return PyLong_FromLongLong(total);
}

PyDoc_STRVAR(bits_from_masks_doc,
"bits_from_masks(masks, bit, lo, hi, bits) -> int\n\n"
"Set bit g of the bitset bits (uint64) for each g in lo..hi whose short-word mask\n"
"masks[g] (uint64) has bit `bit` (0..63); returns how many. O(hi - lo).");

static PyObject *
bits_from_masks(PyObject *self, PyObject *args)
{
    PyObject *o_m, *o_b;
    Py_ssize_t bit, lo, hi;
    if (!PyArg_ParseTuple(args, "OnnnO", &o_m, &bit, &lo, &hi, &o_b)) return NULL;
    Py_buffer mb, bb;
    if (get(o_m, &mb, K_U64, 0, "masks") < 0) return NULL;
    if (get(o_b, &bb, K_U64, 1, "bits") < 0) {
        PyBuffer_Release(&mb);
        return NULL;
    }
    PyObject *result = NULL;
    if (bit < 0 || bit > 63 || lo < 0 || hi < lo || hi > LEN(mb) || NWORDS(hi) > LEN(bb)) {
        PyErr_SetString(PyExc_ValueError, "bit/lo/hi out of range");
        goto done;
    }
    {
        const uint64_t *m = mb.buf;
        uint64_t *b = bb.buf;
        Py_ssize_t hits = 0;
        /* A word of bits gathered in a register, then one OR into `bits` (one store per
         * 64 groups: a store per group chained every iteration through memory). */
        for (Py_ssize_t g = lo; g < hi;) {
            Py_ssize_t w = g >> 6, end = (w + 1) * 64 < hi ? (w + 1) * 64 : hi;
            uint64_t acc = 0;
            for (; g < end; g++) acc |= ((m[g] >> bit) & 1) << (g & 63);
            b[w] |= acc;
            hits += __builtin_popcountll(acc);
        }
        result = PyLong_FromSsize_t(hits);
    }
done:
    PyBuffer_Release(&bb);
    PyBuffer_Release(&mb);
    return result;
}

PyDoc_STRVAR(bits_rows_from_masks_doc,
"bits_rows_from_masks(lo_masks, hi_masks, rows, stride, counts, lo, hi, nogil=0) -> None\n\n"
"The short-word masks of groups lo..hi as rows of bits: for each set bit b of\n"
"lo_masks[g] (b) or hi_masks[g] (64 + b), set bit g of row b (rows[b * stride:],\n"
"uint64) and add one to counts[b] (int64, 128 of them). nogil true: the loop runs\n"
"without the GIL (for arrays no other thread writes or reads meanwhile: a numbering\n"
"being made, ccore's caller's promise). O(hi - lo + bits set).");

static PyObject *
bits_rows_from_masks(PyObject *self, PyObject *args)
{
    PyObject *o_lo, *o_hi, *o_r, *o_c;
    Py_ssize_t stride, lo, hi;
    int nogil = 0;
    if (!PyArg_ParseTuple(args, "OOOnOnn|p", &o_lo, &o_hi, &o_r, &stride, &o_c, &lo, &hi,
                          &nogil))
        return NULL;
    Py_buffer mb[2], rb, cb;
    PyObject *result = NULL;
    if (get(o_lo, &mb[0], K_U64, 0, "lo_masks") < 0) return NULL;
    if (get(o_hi, &mb[1], K_U64, 0, "hi_masks") < 0) goto e0;
    if (get(o_r, &rb, K_U64, 1, "rows") < 0) goto e1;
    if (get(o_c, &cb, K_I64, 1, "counts") < 0) goto e2;
    if (lo < 0 || hi < lo || hi > LEN(mb[0]) || hi > LEN(mb[1]) || LEN(cb) < 128 ||
        stride < NWORDS(hi) || stride > LEN(rb) / 128) {
        PyErr_SetString(PyExc_ValueError, "lo/hi/stride/counts out of range");
        goto done;
    }
    {
        uint64_t *rows = rb.buf;
        int64_t *counts = cb.buf;
        /* nogil (branch open29): the buffers stay held (exported) while the loop runs,
         * which reads and writes nothing else. */
        PyThreadState *save = nogil ? PyEval_SaveThread() : NULL;
        /* Row by row over blocks of 1,024 groups (their masks stay in L1): for each
         * short word some mask of the block holds, a word of bits gathered in a
         * register per 64 groups, then one OR into the row. A store per set bit into
         * 128 rows spread over 16 MB (at 1M groups) cost 2.5x as much. */
        for (Py_ssize_t b0 = lo; b0 < hi; b0 += 1024) {
            Py_ssize_t b1 = b0 + 1024 < hi ? b0 + 1024 : hi;
            for (int half = 0; half < 2; half++) {
                const uint64_t *m = mb[half].buf;
                uint64_t *r = rows + (Py_ssize_t)half * 64 * stride;
                int64_t *c = counts + half * 64;
                uint64_t any = 0;
                for (Py_ssize_t g = b0; g < b1; g++) any |= m[g];
                while (any) {
                    int b = __builtin_ctzll(any);
                    any &= any - 1;
                    uint64_t *row = r + (Py_ssize_t)b * stride;
                    for (Py_ssize_t g = b0; g < b1;) {
                        Py_ssize_t w = g >> 6, end = (w + 1) * 64 < b1 ? (w + 1) * 64 : b1;
                        uint64_t acc = 0;
                        for (; g < end; g++) acc |= ((m[g] >> b) & 1) << (g & 63);
                        row[w] |= acc;
                        c[b] += __builtin_popcountll(acc);
                    }
                }
            }
        }
        if (save) PyEval_RestoreThread(save);
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&cb);
e2:
    PyBuffer_Release(&rb);
e1:
    PyBuffer_Release(&mb[1]);
e0:
    PyBuffer_Release(&mb[0]);
    return result;
}

/* ================================================================== store path
 *
 * The owner's per-store work outside the query kernels (issue #20, the store targets;
 * kept apart from the blocks above):
 *
 *   add_text_known  add_text, with a shortcut for its common case once a memory holds
 *               a few thousand texts: every token of the text has a posting list
 *               already. One lookup per token (no token set: equal tokens find the
 *               same list, so the lists are de-duplicated by address), then one append
 *               of gid per distinct list, calling array.append's C function directly.
 *               At the first new token it lets go of the lists found (nothing appended
 *               yet) and does add_text's work on the same split: the token set, whose
 *               order gives the vocabulary's new ids (the Python path's order).
 *   fold_ascii  the duplicate key's text for an ASCII text: lower-cased (casefold is
 *               lower on ASCII), runs of whitespace (str.split's: \t\n\v\f\r,
 *               \x1c-\x1f, space) as one space, none at either end; None for a
 *               non-ASCII text (the caller folds it in Python).
 */

/* array.append's C function (METH_O), or NULL: then add_text_known calls the descriptor. */
static PyCFunction array_append_fn;

/* Whether `p` is in the open-addressing set `table` (`mask` + 1 slots, a power of two
 * above the number of entries; NULL: empty); adds it if not. */
static int
seen_ptr(PyObject **table, size_t mask, PyObject *p)
{
    size_t h = (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & mask;
    while (table[h]) {
        if (table[h] == p) return 1;
        h = (h + 1) & mask;
    }
    table[h] = p;
    return 0;
}

PyDoc_STRVAR(add_text_known_doc,
"add_text_known(post, low, gid, vocab) -> int\n\n"
"add_text(post, low, gid, vocab), the same structures and result; when every token of\n"
"low.split() has a posting list already, without the token set: gid appended once to\n"
"each distinct list found. O(tokens), plus O(len(token)) per new token.");

static PyObject *
add_text_known(PyObject *self, PyObject *args)
{
    PyObject *post, *vocab_obj;
    long gid;
    PyObject *words = add_args(args, &post, &gid, &vocab_obj);
    if (!words) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(words), got = 0;
    PyObject *stack[64];
    PyObject **lists = n <= 64 ? stack : PyMem_Malloc((size_t)n * sizeof(PyObject *));
    PyObject *num = NULL, *result = NULL, **table = NULL, *table_stack[128];
    int known = 1;
    if (!lists) {
        PyErr_NoMemory();
        goto done;
    }
    /* Every list is held (a new reference) until the end, whatever a lookup runs. */
    for (; got < n; got++) {
        PyObject *lst = PyDict_GetItemWithError(post, PyList_GET_ITEM(words, got));
        if (!lst) {
            if (!PyErr_Occurred()) known = 0;  /* a new token: add_text's way */
            break;
        }
        if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
            PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
            break;
        }
        lists[got] = Py_NewRef(lst);
    }
    if (PyErr_Occurred()) goto done;
    if (!known) {
        result = add_words(post, words, gid, vocab_obj);
        goto done;
    }
    num = PyLong_FromLong(gid);
    if (!num) goto done;
    size_t cap = 128;
    while (cap < 2 * (size_t)n) cap *= 2;
    table = cap == 128 ? table_stack : PyMem_Calloc(cap, sizeof(PyObject *));
    if (!table) {
        PyErr_NoMemory();
        goto done;
    }
    if (table == table_stack) memset(table_stack, 0, sizeof(table_stack));
    for (Py_ssize_t j = 0; j < n; j++) {
        if (seen_ptr(table, cap - 1, lists[j])) continue;  /* the same token again */
        PyObject *r = array_append_fn
            ? array_append_fn(lists[j], num)
            : PyObject_CallFunctionObjArgs(array_append, lists[j], num, NULL);
        if (!r) goto done;
        Py_DECREF(r);
    }
    result = PyLong_FromLong(0);
done:
    if (table && table != table_stack) PyMem_Free(table);
    if (lists) {
        for (Py_ssize_t j = 0; j < got; j++) Py_DECREF(lists[j]);
        if (lists != stack) PyMem_Free(lists);
    }
    Py_XDECREF(num);
    Py_DECREF(words);
    return result;
}

/* str.split()'s whitespace among ASCII characters. */
static inline int
ascii_space(Py_UCS1 c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
}

/* ascii_space as a table over all 256 byte values (1: whitespace): one load a byte. */
static const unsigned char ascii_space_tab[256] = {
    [0x09] = 1, [0x0A] = 1, [0x0B] = 1, [0x0C] = 1, [0x0D] = 1,
    [0x1C] = 1, [0x1D] = 1, [0x1E] = 1, [0x1F] = 1, [' '] = 1,
};

PyDoc_STRVAR(fold_ascii_doc,
"fold_ascii(text) -> str | None\n\n"
"' '.join(text.casefold().split()) for an ASCII text (text itself when that is equal\n"
"to it), None for a non-ASCII one. O(len(text)).");

static PyObject *
fold_ascii(PyObject *self, PyObject *text)
{
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "fold_ascii() takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) Py_RETURN_NONE;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), m = 0;
    /* Already folded: no upper case, no whitespace but single spaces inside. */
    int same = 1;
    for (Py_ssize_t i = 0; i < n && same; i++) {
        Py_UCS1 c = s[i];
        if (c >= 'A' && c <= 'Z') same = 0;
        else if (ascii_space(c) && (c != ' ' || i == 0 || i == n - 1 || s[i + 1] == ' ')) same = 0;
    }
    if (same) return Py_NewRef(text);
    Py_UCS1 *buf = PyMem_Malloc(n ? (size_t)n : 1);
    if (!buf) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS1 c = s[i];
        if (ascii_space(c)) {
            if (m && buf[m - 1] != ' ') buf[m++] = ' ';  /* one space per run */
            continue;
        }
        buf[m++] = c >= 'A' && c <= 'Z' ? (Py_UCS1)(c + ('a' - 'A')) : c;
    }
    if (m && buf[m - 1] == ' ') m--;
    PyObject *out = PyUnicode_New(m, 127);
    if (out) memcpy(PyUnicode_1BYTE_DATA(out), buf, (size_t)m);
    PyMem_Free(buf);
    return out;
}

/* ------------------------------------------------------------------ token cache
 *
 *   add_text_cached  add_text_known's result and structures, with less work per token
 *               for an ASCII text: the tokens are read from `low`'s bytes (no split
 *               list, no str per token) and looked up in a token cache, a
 *               direct-mapped table of token bytes -> (the token str, its posting
 *               list) that the owner keeps per numbering (a capsule); a token not in
 *               it takes a str and the dict lookup, and enters it. The appends write
 *               gid straight into the array's buffer when it has room (array.append
 *               when it has not, or when the array's layout was not recognised at
 *               import). New tokens are acquired in the order of the text's token
 *               set, as add_text does, after the other tokens' appends.
 *   cache_forget    the owner's purge drops a token whose posting list it deletes or
 *               replaces, and records the numbering's epoch: a cache that sees
 *               another epoch or another posting dict than its last is emptied
 *               first (a change it was not told of can never leave a stale list).
 */

/* CPython's array object as Modules/arraymodule.c lays it out (3.8 to 3.13); read only
 * when array_layout_check() found it so on a live array at import. `ob_descr` points to
 * a struct arraydescr, whose first member is the typecode (a char). */
struct array_layout {
    PyObject_VAR_HEAD
    char *ob_item;
    Py_ssize_t allocated;
    const char *ob_descr;
    PyObject *weakreflist;
    Py_ssize_t ob_exports;
};
static int array_direct;

static int
array_layout_check(void)
{
    PyObject *a = PyObject_CallFunction(array_type, "s(iii)", "i", 7, 8, 9);
    if (!a) return -1;
    struct array_layout *l = (struct array_layout *)a;
    Py_buffer b;
    if (PyObject_GetBuffer(a, &b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(a);
        return -1;
    }
    int ok = sizeof(int) == 4 && Py_SIZE(a) == 3 && l->ob_item == (char *)b.buf &&
             l->allocated >= 3 && l->allocated < 64 && l->ob_exports == 1 &&
             l->ob_descr && l->ob_descr[0] == 'i' && b.itemsize == 4 &&
             ((int *)b.buf)[2] == 9;
    PyBuffer_Release(&b);
    ok = ok && l->ob_exports == 0;
    Py_DECREF(a);
    if (ok) {
        PyObject *q = PyObject_CallFunction(array_type, "s(i)", "q", 1);
        if (!q) return -1;
        ok = ((struct array_layout *)q)->ob_descr[0] == 'q';
        Py_DECREF(q);
    }
    array_direct = ok;
    return 0;
}

/* gid (== num) appended to the posting list `lst` (an exact array.array, checked by the
 * caller): in place when it is an array('i') with room and no exported buffer, else by
 * array.append (which grows it, or refuses it as before). 0, or -1 with an error set. */
static int grow_direct = 1; /* set_grow_direct(): a full array grown here */

static inline int
posting_append(PyObject *lst, int32_t gid, PyObject *num)
{
    if (array_direct) {
        struct array_layout *l = (struct array_layout *)lst;
        Py_ssize_t n = Py_SIZE(lst);
        if (l->ob_descr[0] == 'i' && l->ob_exports == 0) {
            if (n >= l->allocated) {
                if (!grow_direct || n != l->allocated || n > PY_SSIZE_T_MAX / 8) goto call;
                /* array_resize(lst, n + 1) (Modules/arraymodule.c): the same capacity
                 * and allocator, without array.append's call and int parsing. */
                Py_ssize_t newsize = n + 1;
                size_t cap = (size_t)(newsize >> 4) + (n < 8 ? 3 : 7) + (size_t)newsize;
                char *items = PyMem_Realloc(l->ob_item, cap * sizeof(int32_t));
                if (!items) {
                    PyErr_NoMemory();
                    return -1;
                }
                l->ob_item = items;
                l->allocated = (Py_ssize_t)cap;
            }
            ((int32_t *)l->ob_item)[n] = gid;
            Py_SET_SIZE(lst, n + 1);
            return 0;
        }
    }
call:;
    PyObject *r = array_append_fn ? array_append_fn(lst, num)
                                  : PyObject_CallFunctionObjArgs(array_append, lst, num, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static const char TOKCACHE_NAME[] = "actormem._index._cwordoverlap.tokcache";
#define TOKCACHE_BITS 15     /* the most slots: 2^15, 1 MiB */
#define TOKCACHE_MIN_BITS 8  /* a new cache's: 2^8, 8 KiB */

/* A slot: the token's first 8 bytes (zero-padded) and its length, so that a token of
 * up to 8 bytes is matched without reading its str; 32 bytes, aligned. */
struct tokslot {
    uint64_t word;
    Py_ssize_t len;
    PyObject *tok; /* an ASCII str, or NULL: empty */
    PyObject *lst; /* its posting list */
};

struct tokcache {
    PyObject *post; /* the posting dict the entries came from (compared, not held) */
    long long epoch;
    struct tokslot *slot; /* 1 << bits slots, 64-byte aligned within `raw` */
    void *raw;
    int bits; /* TOKCACHE_MIN_BITS to TOKCACHE_BITS: grown with the posting dict */
    /* An add_text_cached on it is running: the dict lookups it makes may run Python
     * code (a key's __eq__), which must not empty, grow or change the cache under the
     * slot pointers that call holds (a use after free). */
    int busy;
    struct active_bits ab; /* ADD_ACTIVE_BITS's bits, kept across calls */
    /* ADD_GRAM_STRS's table (NULL until a new token needs it), 1 << gbits slots: at
     * least twice the gram dict's keys when made or grown, GRAMTAB_MIN_BITS to
     * GRAMTAB_BITS. Its strs depend on nothing else, so a new dict or epoch keeps it. */
    struct gramslot *gslot;
    int gbits;
    /* count_words' candidate signatures (flag 128), of their own item dict: kept
     * whatever the posting dict and epoch (an id's item never changes). */
    struct candsigs cs;
};

#define GRAMTAB_MIN_BITS 10 /* 1,024 slots, 16 KiB */
#define GRAMTAB_BITS 16     /* 65,536 slots, 1 MiB */

static void
gramtab_free(struct gramslot *slot, int bits)
{
    if (!slot) return;
    for (size_t i = 0; i < ((size_t)1 << bits); i++) Py_XDECREF(slot[i].s);
    PyMem_Free(slot);
}

/* The gram strs' table of `c`, made or grown (emptied: a slot's place depends on the
 * size) to at least twice `keys` slots (up to 1 << GRAMTAB_BITS). 0, or -1 with
 * MemoryError set (the table then as it was). */
static int
gramtab_fit(struct tokcache *c, Py_ssize_t keys)
{
    int bits = c->gslot ? c->gbits : GRAMTAB_MIN_BITS;
    while (bits < GRAMTAB_BITS && ((Py_ssize_t)1 << bits) < 2 * keys) bits++;
    if (c->gslot && bits == c->gbits) return 0;
    struct gramslot *slot = PyMem_Calloc((size_t)1 << bits, sizeof(struct gramslot));
    if (!slot) {
        PyErr_NoMemory();
        return -1;
    }
    gramtab_free(c->gslot, c->gbits);
    c->gslot = slot;
    c->gbits = bits;
    return 0;
}

static int
probe_table_begin(PyObject *tcap, PyObject *grams)
{
    probe_gslot = NULL;
    struct tokcache *c = PyCapsule_GetPointer(tcap, TOKCACHE_NAME);
    if (!c) return -1;
    if (c->busy) return 0; /* (cannot happen: no add runs during a count) */
    if (!c->gslot && gramtab_fit(c, PyDict_GET_SIZE(grams)) < 0) return -1;
    probe_gslot = c->gslot;
    probe_gbits = c->gbits;
    return 0;
}

static struct candsigs *
cand_sigs_begin(PyObject *tcap, PyObject *items)
{
    struct tokcache *c = PyCapsule_GetPointer(tcap, TOKCACHE_NAME);
    if (!c) return NULL;
    if (c->busy) return NULL; /* (cannot happen: no add runs during a count) */
    if (c->cs.items != items) {
        PyMem_Free(c->cs.sig);
        c->cs.sig = NULL;
        c->cs.cap = 0;
        Py_XSETREF(c->cs.items, Py_NewRef(items));
    }
    return &c->cs;
}

static void
tokcache_clear(struct tokcache *c)
{
    for (size_t i = 0; i < ((size_t)1 << c->bits); i++) {
        struct tokslot *s = &c->slot[i];
        if (s->tok) {
            Py_CLEAR(s->tok);
            Py_CLEAR(s->lst);
        }
    }
}

static void
tokcache_destroy(PyObject *capsule)
{
    struct tokcache *c = PyCapsule_GetPointer(capsule, TOKCACHE_NAME);
    if (!c) {
        PyErr_Clear();
        return;
    }
    tokcache_clear(c);
    Py_CLEAR(c->ab.set);
    Py_CLEAR(c->cs.items);
    PyMem_Free(c->cs.sig);
    gramtab_free(c->gslot, c->gbits);
    PyMem_Free(c->raw);
    PyMem_Free(c);
}

PyDoc_STRVAR(token_cache_doc,
"token_cache() -> capsule\n\n"
"A new, empty token cache for add_text_cached: a table of 2**8 slots (8 KiB), grown\n"
"(and emptied) as the posting dict it serves grows, to 2**15 slots (1 MiB).");

static PyObject *
token_cache(PyObject *self, PyObject *unused)
{
    struct tokcache *c = PyMem_Calloc(1, sizeof(struct tokcache));
    if (!c) return PyErr_NoMemory();
    c->raw = PyMem_Calloc(1, (sizeof(struct tokslot) << TOKCACHE_MIN_BITS) + 64);
    if (!c->raw) {
        PyMem_Free(c);
        return PyErr_NoMemory();
    }
    c->slot = (struct tokslot *)(((uintptr_t)c->raw + 63) & ~(uintptr_t)63);
    c->bits = TOKCACHE_MIN_BITS;
    PyObject *cap = PyCapsule_New(c, TOKCACHE_NAME, tokcache_destroy);
    if (!cap) {
        PyMem_Free(c->raw);
        PyMem_Free(c);
    }
    return cap;
}

/* FNV-1a over the token's bytes, then mixed (the slot is its low bits). */
static inline uint64_t
tok_hash(const Py_UCS1 *s, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* The first 8 bytes of a token, zero-padded. */
static inline uint64_t
tok_word(const Py_UCS1 *b, Py_ssize_t n)
{
    uint64_t w = 0;
    memcpy(&w, b, n < 8 ? (size_t)n : 8);
    return w;
}

static inline struct tokslot *
tok_slot(struct tokcache *c, uint64_t h)
{
    return &c->slot[h & (((uint64_t)1 << c->bits) - 1)];
}

/* A table of at least 2 * `tokens` slots (up to 2^TOKCACHE_BITS) for cache `c`: a
 * larger one, empty, when its own is smaller (a small memory's tokens, scattered over
 * the slots, would touch nearly every page of the largest table). 0, or -1 with
 * MemoryError set (the cache then as it was). */
static int
tokcache_fit(struct tokcache *c, Py_ssize_t tokens)
{
    int bits = c->bits;
    while (bits < TOKCACHE_BITS && ((Py_ssize_t)1 << bits) < 2 * tokens) bits++;
    if (bits == c->bits) return 0;
    void *raw = PyMem_Calloc(1, (sizeof(struct tokslot) << bits) + 64);
    if (!raw) {
        PyErr_NoMemory();
        return -1;
    }
    tokcache_clear(c);
    PyMem_Free(c->raw);
    c->raw = raw;
    c->slot = (struct tokslot *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    c->bits = bits;
    return 0;
}

/* Whether slot `s` holds the token b[0:n] (its first 8 bytes `word`). */
static inline int
slot_is(const struct tokslot *s, uint64_t word, const Py_UCS1 *b, Py_ssize_t n)
{
    return s->tok && s->len == n && s->word == word &&
           (n <= 8 || memcmp(PyUnicode_1BYTE_DATA(s->tok) + 8, b + 8, (size_t)n - 8) == 0);
}

/* The cache for `post` at `epoch`, emptied first if it served another dict or epoch;
 * NULL with an error set if `cap` is not one. */
static struct tokcache *
tokcache_get(PyObject *cap, PyObject *post, long long epoch)
{
    struct tokcache *c = PyCapsule_GetPointer(cap, TOKCACHE_NAME);
    if (!c) return NULL;
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the token cache is in use");
        return NULL;
    }
    if (c->post != post || c->epoch != epoch) {
        tokcache_clear(c);
        c->post = post;
        c->epoch = epoch;
    }
    return c;
}

/* Enter (tok, lst) at slot `s` (new references taken), dropping what was there. `tok`
 * is an ASCII str. */
static inline void
slot_set(struct tokslot *s, PyObject *tok, PyObject *lst)
{
    PyObject *otok = s->tok, *olst = s->lst;
    Py_ssize_t n = PyUnicode_GET_LENGTH(tok);
    s->word = tok_word(PyUnicode_1BYTE_DATA(tok), n);
    s->len = n;
    s->tok = Py_NewRef(tok);
    s->lst = Py_NewRef(lst);
    Py_XDECREF(otok);
    Py_XDECREF(olst);
}

/* One token of a text in add_text_cached: where it is, its slot, its list. */
struct tokref {
    Py_ssize_t at, n;
    struct tokslot *slot; /* NULL: a token that is not ASCII (`tok`) */
    PyObject *tok;        /* such a token's str (a new reference), else NULL */
    PyObject *lst; /* a new reference (a lookup may drop the dict's and the cache's own
                    * through a key's __eq__); NULL: a new token */
};

PyDoc_STRVAR(add_text_cached_doc,
"add_text_cached(post, low, gid, vocab, cache, epoch, flags=0) -> int\n\n"
"add_text_known(post, low, gid, vocab), the same structures and result, through the\n"
"token cache `cache` (token_cache()) of the numbering whose posting dict is `post` at\n"
"`epoch`. `flags`: 1, new tokens acquired without the key set where their new\n"
"grams' order does not need it; 2, new posting lists, gram lists and _sub sets\n"
"untracked by the cyclic collector (the same structures either way); 4, a text that\n"
"is not ASCII served by the cache too (its ASCII tokens; the others looked up in\n"
"`post`) instead of split; 8, a new ASCII token's 1/2-character substrings tested\n"
"against _active's words as bits kept in `cache` (the same structures); 16, the\n"
"tokens found in one pass; 32, a new ASCII token's 2- and 3-character substrings\n"
"taken from a table of such strs kept in `cache` (the same structures); any other\n"
"value than 0 to 63 raises ValueError. O(len(low)), plus O(len(token)) per new token\n"
"(and O(len(vocab._active)) with flag 8, a new ASCII token and _active changed since\n"
"the cache's bits were built).");

/* add_text_cached's work for one text, its arguments checked (post an exact dict, low
 * an exact str, gid in [0, INT32_MAX]): the new tokens' count, or NULL with an error. */
static PyObject *
add_cached_one(PyObject *post, PyObject *low, long gid, PyObject *vocab_obj, PyObject *cap,
               long long epoch, int flags)
{
    int fast = (flags & ADD_ACQUIRE_FAST) != 0;
    int ascii = PyUnicode_IS_ASCII(low);
    Py_UCS1 *nb = NULL; /* a text that is not ASCII, narrowed (see below) */
    struct tokcache *c = tokcache_get(cap, post, epoch);
    if (!c || tokcache_fit(c, PyDict_GET_SIZE(post)) < 0) return NULL;
    PyObject *num = PyLong_FromLong(gid);
    if (!num) return NULL;
    c->busy = 1;
    Py_ssize_t k = 0; /* refs[0..k) filled (their lists held) */
    PyObject *result = NULL, *missing = NULL, *words = NULL, *toks = NULL;
    PyObject **table = NULL, *table_stack[128];
    struct tokref *refs = NULL, refs_stack[64];
    size_t cap_n = 128;
    if (!ascii && !(flags & ADD_CACHE_UCS)) {
        /* str.split's other whitespace: add_text_known's way, appends in place. */
        words = PyUnicode_Split(low, NULL, -1);
        if (!words) goto done;
        Py_ssize_t n = PyList_GET_SIZE(words);
        while (cap_n < 2 * (size_t)n) cap_n *= 2;
        table = cap_n == 128 ? table_stack : PyMem_Calloc(cap_n, sizeof(PyObject *));
        if (!table) {
            PyErr_NoMemory();
            goto done;
        }
        if (table == table_stack) memset(table_stack, 0, sizeof(table_stack));
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *tok = PyList_GET_ITEM(words, j);
            PyObject *lst = PyDict_GetItemWithError(post, tok);
            if (!lst) {
                if (PyErr_Occurred()) goto done;
                if (!missing && !(missing = PySet_New(NULL))) goto done;
                if (PySet_Add(missing, tok) < 0) goto done;
                continue;
            }
            if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
                PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
                goto done;
            }
            if (seen_ptr(table, cap_n - 1, lst)) continue;
            if (posting_append(lst, (int32_t)gid, num) < 0) goto done;
        }
    } else {
        const Py_UCS1 *s;
        Py_ssize_t len = PyUnicode_GET_LENGTH(low), count = 0;
        if (ascii) {
            s = PyUnicode_1BYTE_DATA(low);
        } else {
            /* The text narrowed to bytes: an ASCII character as itself, any other
             * whitespace of str.split (Py_UNICODE_ISSPACE) as ' ', anything else as
             * 0x80. The tokens then fall where split puts them; a token without 0x80
             * is ASCII, its bytes here. */
            nb = PyMem_Malloc((size_t)len + 1);
            if (!nb) {
                PyErr_NoMemory();
                goto done;
            }
            int kind = PyUnicode_KIND(low);
            const void *data = PyUnicode_DATA(low);
#define NARROW(ch) ((ch) < 128 ? (Py_UCS1)(ch) : Py_UNICODE_ISSPACE(ch) ? ' ' : 0x80)
            if (kind == PyUnicode_2BYTE_KIND) { /* nearly all: a ’ in the text */
                const Py_UCS2 *d = data;
                for (Py_ssize_t i = 0; i < len; i++) nb[i] = NARROW(d[i]);
            } else if (kind == PyUnicode_1BYTE_KIND) {
                const Py_UCS1 *d = data;
                for (Py_ssize_t i = 0; i < len; i++) nb[i] = NARROW(d[i]);
            } else {
                const Py_UCS4 *d = data;
                for (Py_ssize_t i = 0; i < len; i++) nb[i] = NARROW(d[i]);
            }
#undef NARROW
            s = nb;
        }
        if (flags & ADD_SCAN_ONE) {
            /* The tokens in one pass, into refs (grown by doubling), each one's cache
             * slot (tok_hash) and first word (tok_word) computed as it is read: the
             * same tokens, slots and words as the passes below. */
            Py_ssize_t refs_cap = 64, i = 0;
            refs = refs_stack;
            while (i < len) {
                while (i < len && ascii_space_tab[s[i]]) i++;
                if (i >= len) break;
                Py_ssize_t a = i;
                uint64_t h = 0xcbf29ce484222325ull;
                while (i < len && !ascii_space_tab[s[i]]) h = (h ^ s[i++]) * 0x100000001b3ull;
                if (k == refs_cap) {
                    struct tokref *more = PyMem_Malloc(2 * (size_t)refs_cap * sizeof(struct tokref));
                    if (!more) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    memcpy(more, refs, (size_t)k * sizeof(struct tokref));
                    if (refs != refs_stack) PyMem_Free(refs);
                    refs = more;
                    refs_cap *= 2;
                }
                struct tokref *r = &refs[k++];
                r->at = a;
                r->n = i - a;
                r->lst = NULL;
                r->tok = NULL;
                if (nb && memchr(s + a, 0x80, (size_t)r->n)) {
                    r->slot = NULL;
                    if (!(r->tok = PyUnicode_Substring(low, a, i))) goto done;
                    continue;
                }
                r->slot = tok_slot(c, h ^ (h >> 29));
                __builtin_prefetch(r->slot);
            }
            count = k;
            cap_n = 16;
            while (cap_n < 2 * (size_t)count) cap_n *= 2;
            table = cap_n <= 128 ? table_stack : PyMem_Malloc(cap_n * sizeof(PyObject *));
            if (!table) {
                PyErr_NoMemory();
                goto done;
            }
            memset(table, 0, cap_n * sizeof(PyObject *));
        } else {
        for (Py_ssize_t i = 0; i < len; i++) {  /* the tokens: their first bytes */
            count += !ascii_space(s[i]) && (i == 0 || ascii_space(s[i - 1]));
        }
        /* The de-duplication table: twice the tokens, at least 16 slots, cleared. */
        cap_n = 16;
        while (cap_n < 2 * (size_t)count) cap_n *= 2;
        table = cap_n <= 128 ? table_stack : PyMem_Malloc(cap_n * sizeof(PyObject *));
        refs = count <= 64 ? refs_stack : PyMem_Malloc((size_t)count * sizeof(struct tokref));
        if (!table || !refs) {
            PyErr_NoMemory();
            goto done;
        }
        memset(table, 0, cap_n * sizeof(PyObject *));
        /* In passes over the tokens, each prefetching what the next one reads (the
         * slots, the lists' headers, the lists' tails): the misses of a large memory
         * overlap instead of coming one after another. */
        Py_ssize_t i = 0;
        while (i < len) {
            while (i < len && ascii_space(s[i])) i++;
            if (i >= len) break;
            Py_ssize_t a = i;
            while (i < len && !ascii_space(s[i])) i++;
            struct tokref *r = &refs[k++];
            r->at = a;
            r->n = i - a;
            r->lst = NULL;
            r->tok = NULL;
            if (nb && memchr(s + a, 0x80, (size_t)r->n)) {
                /* Not ASCII: its str, as split would make it (the canonical form). */
                r->slot = NULL;
                if (!(r->tok = PyUnicode_Substring(low, a, i))) goto done;
                continue;
            }
            r->slot = tok_slot(c, tok_hash(s + a, r->n));
            __builtin_prefetch(r->slot);
        }
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            struct tokref *r = &refs[j];
            const Py_UCS1 *b = s + r->at;
            Py_ssize_t n = r->n;
            struct tokslot *slot = r->slot;
            PyObject *lst;
            if (!slot) {
                lst = PyDict_GetItemWithError(post, r->tok);
                if (!lst) {
                    if (PyErr_Occurred()) goto done;
                    if (!missing && !(missing = PySet_New(NULL))) goto done;
                    if (PySet_Add(missing, r->tok) < 0) goto done;
                    continue;
                }
                if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
                    PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
                    goto done;
                }
            } else if (slot_is(slot, tok_word(b, n), b, n)) {
                lst = slot->lst;
            } else {
                PyObject *tok = PyUnicode_New(n, 127);
                if (!tok) goto done;
                memcpy(PyUnicode_1BYTE_DATA(tok), b, (size_t)n);
                lst = PyDict_GetItemWithError(post, tok);
                if (!lst) {
                    int bad = PyErr_Occurred() != NULL;
                    if (!bad && !missing && !(missing = PySet_New(NULL))) bad = 1;
                    if (!bad && PySet_Add(missing, tok) < 0) bad = 1;
                    Py_DECREF(tok);
                    if (bad) goto done;
                    r->lst = NULL;
                    continue;
                }
                if (Py_TYPE(lst) != (PyTypeObject *)array_type) {
                    Py_DECREF(tok);
                    PyErr_SetString(PyExc_TypeError, "posting lists must be array('i')");
                    goto done;
                }
                slot_set(slot, tok, lst);
                Py_DECREF(tok);
            }
            r->lst = Py_NewRef(lst);
            __builtin_prefetch((char *)lst + offsetof(struct array_layout, ob_item));
        }
        if (array_direct) {
            for (Py_ssize_t j = 0; j < k; j++) {
                struct array_layout *l = (struct array_layout *)refs[j].lst;
                if (l && Py_SIZE(l) < l->allocated) {
                    __builtin_prefetch(l->ob_item + 4 * Py_SIZE(l), 1);
                }
            }
        }
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *lst = refs[j].lst;
            if (!lst || seen_ptr(table, cap_n - 1, lst)) continue;
            if (posting_append(lst, (int32_t)gid, num) < 0) goto done;
        }
    }
    Py_ssize_t fresh = 0;
    if (missing && fast && PySet_GET_SIZE(missing) == 1) {
        /* One new token: the set's order cannot matter. */
        toks = Py_NewRef(missing);
    } else if (missing && fast && !words) {
        /* The text's token set as set(low.split()) makes it (the same adds in the same
         * order), from the cache's strs where they are still there: no split list. */
        toks = PySet_New(NULL);
        if (!toks) goto done;
        const Py_UCS1 *b0 = nb ? nb : PyUnicode_1BYTE_DATA(low);
        for (Py_ssize_t j = 0; j < k; j++) {
            const Py_UCS1 *b = b0 + refs[j].at;
            Py_ssize_t n = refs[j].n;
            struct tokslot *slot = refs[j].slot;
            int r;
            if (!slot) {
                r = PySet_Add(toks, refs[j].tok);
            } else if (slot_is(slot, tok_word(b, n), b, n)) {
                r = PySet_Add(toks, slot->tok);
            } else {
                PyObject *tok = PyUnicode_New(n, 127);
                if (!tok) goto done;
                memcpy(PyUnicode_1BYTE_DATA(tok), b, (size_t)n);
                r = PySet_Add(toks, tok);
                Py_DECREF(tok);
            }
            if (r < 0) goto done;
        }
    }
    if (missing) {
        /* The new tokens, acquired in the order of the text's token set (add_text's). */
        if (!toks) {
            if (!words && !(words = PyUnicode_Split(low, NULL, -1))) goto done;
            toks = PySet_New(words);
            if (!toks) goto done;
        }
        struct vocab v;
        if (vocab_load(vocab_obj, &v) < 0) goto done;
        v.untrack = (flags & ADD_UNTRACK) != 0;
        v.ab = (flags & ADD_ACTIVE_BITS) ? &c->ab : NULL;
        if ((flags & ADD_GRAM_STRS) && gramtab_fit(c, PyDict_GET_SIZE(v.grams)) < 0) {
            vocab_release(&v);
            goto done;
        }
        v.gslot = (flags & ADD_GRAM_STRS) ? c->gslot : NULL;
        v.gbits = c->gbits;
        PyObject *it = PyObject_GetIter(toks), *tok;
        if (it) {
            while ((tok = PyIter_Next(it)) != NULL) {
                int in = PySet_Contains(missing, tok), r = in;
                if (in > 0) {
                    PyObject *one = NULL;
                    if (!fast) {
                        r = vocab_acquire(&v, tok);
                        if (r == 0) one = PyObject_CallFunction(array_type, "s(O)", "i", num);
                    } else if ((r = vocab_acquire_fast(&v, tok)) == 0) {
                        /* array('i', [gid]) as a copy of array('i', [0]) with gid
                         * written in: no argument tuples to build and parse. */
                        one = PySequence_Repeat(array_one, 1);
                        if (one && PySequence_SetItem(one, 0, num) < 0) Py_CLEAR(one);
                    }
                    /* An array holds no references: never in a cycle. */
                    if (one && v.untrack) PyObject_GC_UnTrack(one);
                    if (one) r = PyDict_SetItem(post, tok, one);
                    else r = -1;
                    if (r == 0 && PyUnicode_IS_ASCII(tok)) {
                        Py_ssize_t n = PyUnicode_GET_LENGTH(tok);
                        slot_set(tok_slot(c, tok_hash(PyUnicode_1BYTE_DATA(tok), n)), tok, one);
                    }
                    Py_XDECREF(one);
                    fresh++;
                }
                Py_DECREF(tok);
                if (r < 0) break;
            }
            Py_DECREF(it);
        }
        vocab_release(&v);
        if (PyErr_Occurred()) goto done;
    }
    result = PyLong_FromSsize_t(fresh);
done:
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_XDECREF(refs[j].lst);
        Py_XDECREF(refs[j].tok);
    }
    c->busy = 0;
    PyMem_Free(nb);
    if (table && table != table_stack) PyMem_Free(table);
    if (refs && refs != refs_stack) PyMem_Free(refs);
    Py_XDECREF(toks);
    Py_XDECREF(words);
    Py_XDECREF(missing);
    Py_DECREF(num);
    return result;
}

static PyObject *
add_text_cached(PyObject *self, PyObject *args)
{
    PyObject *post, *low, *vocab_obj, *cap;
    long gid;
    long long epoch;
    int flags = 0;
    if (!PyArg_ParseTuple(args, "O!UlOOL|i", &PyDict_Type, &post, &low, &gid, &vocab_obj, &cap,
                          &epoch, &flags)) {
        return NULL;
    }
    if (add_flags_check(flags) < 0) return NULL;
    if (!PyDict_CheckExact(post) || !PyUnicode_CheckExact(low)) {
        PyErr_SetString(PyExc_TypeError, "post must be a dict and low a str");
        return NULL;
    }
    if (gid < 0 || gid > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "gid out of range");
        return NULL;
    }
    return add_cached_one(post, low, gid, vocab_obj, cap, epoch, flags);
}

PyDoc_STRVAR(active_bits_builds_doc,
"_active_bits_builds() -> int\n\n"
"How many times the compiled adds built the active words' bits (knobs._ACTIVE_BITS):\n"
"once per token cache and state of _active (tests).");

static PyObject *
active_bits_builds_get(PyObject *self, PyObject *unused)
{
    return PyLong_FromSsize_t(active_bits_builds);
}

PyDoc_STRVAR(add_texts_cached_doc,
"add_texts_cached(post, lows, gid, vocab, cache, epoch, flags=0) -> int\n\n"
"add_text_cached(post, lows[i], gid + i, vocab, cache, epoch, flags) for each i in order, in\n"
"one call (a batch of new texts): the same structures; returns the new tokens' total.\n"
"An error stops the loop (the texts before it stay added). O(sum of the texts).");

static PyObject *
add_texts_cached(PyObject *self, PyObject *args)
{
    PyObject *post, *lows, *vocab_obj, *cap;
    long gid;
    long long epoch;
    int flags = 0;
    if (!PyArg_ParseTuple(args, "O!O!lOOL|i", &PyDict_Type, &post, &PyList_Type, &lows, &gid,
                          &vocab_obj, &cap, &epoch, &flags)) {
        return NULL;
    }
    if (add_flags_check(flags) < 0) return NULL;
    if (!PyDict_CheckExact(post)) {
        PyErr_SetString(PyExc_TypeError, "post must be a dict");
        return NULL;
    }
    /* A copy: the dict lookups may run Python code that changes the list. */
    PyObject *texts = PyList_AsTuple(lows);
    if (!texts) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(texts), fresh = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(texts, i))) {
            Py_DECREF(texts);
            PyErr_SetString(PyExc_TypeError, "lows must be a list of str");
            return NULL;
        }
    }
    if (gid < 0 || gid > INT32_MAX || n > (Py_ssize_t)INT32_MAX - gid + 1) {
        Py_DECREF(texts);
        PyErr_SetString(PyExc_ValueError, "gid out of range");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = add_cached_one(post, PyTuple_GET_ITEM(texts, i), gid + (long)i, vocab_obj,
                                     cap, epoch, flags);
        if (!r) {
            Py_DECREF(texts);
            return NULL;
        }
        fresh += PyLong_AsSsize_t(r);
        Py_DECREF(r);
    }
    Py_DECREF(texts);
    return PyLong_FromSsize_t(fresh);
}

PyDoc_STRVAR(cache_forget_doc,
"cache_forget(cache, post, token, epoch) -> None\n\n"
"The owner deleted or replaced post[token] and moved the numbering to `epoch`: the\n"
"token leaves the cache, which then serves `post` at `epoch`. O(len(token)).");

static PyObject *
cache_forget(PyObject *self, PyObject *args)
{
    PyObject *cap, *post, *tok;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OO!UL", &cap, &PyDict_Type, &post, &tok, &epoch)) return NULL;
    struct tokcache *c = PyCapsule_GetPointer(cap, TOKCACHE_NAME);
    if (!c) return NULL;
    if (c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the token cache is in use");
        return NULL;
    }
    if (c->post != post || c->epoch + 1 != epoch) {
        /* Another change came first (or another dict): start afresh. */
        tokcache_clear(c);
    } else if (PyUnicode_IS_ASCII(tok)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(tok);
        const Py_UCS1 *b = PyUnicode_1BYTE_DATA(tok);
        struct tokslot *s = tok_slot(c, tok_hash(b, n));
        if (slot_is(s, tok_word(b, n), b, n)) {
            Py_CLEAR(s->tok);
            Py_CLEAR(s->lst);
        }
    }
    c->post = post;
    c->epoch = epoch;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(cache_entries_doc,
"cache_entries(cache) -> (post_id, epoch, [(token, list), ...])\n\n"
"What the cache holds (for the index's consistency checks): the id() of the posting\n"
"dict and the epoch it serves, and its entries. O(slots).");

static PyObject *
cache_entries(PyObject *self, PyObject *cap)
{
    struct tokcache *c = PyCapsule_GetPointer(cap, TOKCACHE_NAME);
    if (!c) return NULL;
    PyObject *items = PyList_New(0);
    if (!items) return NULL;
    for (size_t i = 0; i < ((size_t)1 << c->bits); i++) {
        struct tokslot *s = &c->slot[i];
        if (!s->tok) continue;
        PyObject *pair = PyTuple_Pack(2, s->tok, s->lst);
        if (!pair || PyList_Append(items, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(items);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return Py_BuildValue("(NLN)", PyLong_FromVoidPtr(c->post), c->epoch, items);
}

/* ------------------------------------------------------------------ duplicate key hash
 *
 *   fold_hash   a hash of the duplicate key's text fold(text) = ' '.join(
 *               text.casefold().split()), computed without building it: over its code
 *               points (so equal folds hash equal whatever the strings' kinds), an
 *               ASCII text lower-cased on the fly, any other casefolded by str.casefold
 *               first. Only equality matters to the caller (a group key; consolidation
 *               compares the folds themselves).
 */

static inline uint64_t
fold_mix(uint64_t h, Py_UCS4 c)
{
    return fold_hash_mix(h, (uint32_t)c);
}

/* An ASCII byte lower-cased, 0xFF for str.split's whitespace (fold_hash's table path;
 * bytes above 127 never read there). Filled at import. */
static unsigned char fold_tab[256];

/* An ASCII byte lower-cased (lower_text). Filled at import. */
static unsigned char lower_tab[256];
/* str.lower's C function (METH_NOARGS), or NULL: lower_text's ASCII path. */
static PyCFunction str_lower_fn;

static void
fold_tab_init(void)
{
    for (int c = 0; c < 256; c++) {
        lower_tab[c] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : (unsigned char)c;
        fold_tab[c] = ascii_space((Py_UCS1)c) ? 0xFF
                      : (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A'))
                                               : (unsigned char)c;
    }
}

PyDoc_STRVAR(fold_hash_doc,
"fold_hash(text) -> int\n\n"
"A hash in [0, 2**62) of ' '.join(text.casefold().split()), equal for texts whose folds\n"
"are equal. O(len(text)).");

/* fold_hash's 64-bit chain of the exact str `text` into *out (before the final mix);
 * 0, or -1 with an exception set (casefold failed). */
static int
fold_hash_chain(PyObject *text, int direct, uint64_t *out)
{
    uint64_t h = 0xcbf29ce484222325ull;
    int gap = 0, any = 0; /* a whitespace run since the last character; any character */
    if (direct == 2 && PyUnicode_IS_ASCII(text)) {
        /* The same values by one table load a byte (fold_tab: the character lower-cased,
         * 0xFF for whitespace): _foldhash.h's formula, the row reader's too. */
        *out = fold_hash_ascii_chain(h, PyUnicode_1BYTE_DATA(text),
                                     (size_t)PyUnicode_GET_LENGTH(text), fold_tab);
        return 0;
    } else if (PyUnicode_IS_ASCII(text)) {
        const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS1 c = s[i];
            if (ascii_space(c)) {
                gap = 1;
                continue;
            }
            if (gap && any) h = fold_mix(h, ' ');
            gap = 0;
            any = 1;
            h = fold_mix(h, c >= 'A' && c <= 'Z' ? (Py_UCS4)(c + ('a' - 'A')) : c);
        }
#if PY_VERSION_HEX < 0x030D0000
    } else if (direct == 2) {
        /* fold_hash_direct's loop below, an ASCII code point (most of them: a text is
         * rarely not ASCII for more than a few) by fold_tab, per kind. */
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
#define FOLD_LOOP(T)                                                         \
        for (Py_ssize_t i = 0; i < n; i++) {                                 \
            Py_UCS4 c = ((const T *)data)[i], m[3];                          \
            int k = 1;                                                       \
            if (c < 128) {                                                   \
                unsigned t = fold_tab[c];                                    \
                if (t == 0xFF) {                                             \
                    gap = 1;                                                 \
                    continue;                                                \
                }                                                            \
                if (gap && any) h = fold_mix(h, ' ');                        \
                gap = 0;                                                     \
                any = 1;                                                     \
                h = fold_mix(h, t);                                          \
                continue;                                                    \
            }                                                                \
            k = _PyUnicode_ToFoldedFull(c, m);                               \
            for (int j = 0; j < k; j++) {                                    \
                if (Py_UNICODE_ISSPACE(m[j])) {                              \
                    gap = 1;                                                 \
                    continue;                                                \
                }                                                            \
                if (gap && any) h = fold_mix(h, ' ');                        \
                gap = 0;                                                     \
                any = 1;                                                     \
                h = fold_mix(h, m[j]);                                       \
            }                                                                \
        }
        if (kind == PyUnicode_2BYTE_KIND) {
            FOLD_LOOP(Py_UCS2)
        } else if (kind == PyUnicode_1BYTE_KIND) {
            FOLD_LOOP(Py_UCS1)
        } else {
            FOLD_LOOP(Py_UCS4)
        }
#undef FOLD_LOOP
    } else if (direct) {
        /* str.casefold is per code point (no context): each one folded here as it
         * would map it, an ASCII one inline, without building the folded str. */
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i), m[3];
            int k = 1;
            if (c < 128) {
                m[0] = c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
            } else {
                k = _PyUnicode_ToFoldedFull(c, m);
            }
            for (int j = 0; j < k; j++) {
                if (Py_UNICODE_ISSPACE(m[j])) {
                    gap = 1;
                    continue;
                }
                if (gap && any) h = fold_mix(h, ' ');
                gap = 0;
                any = 1;
                h = fold_mix(h, m[j]);
            }
        }
#endif
    } else {
        PyObject *t = PyObject_CallMethod(text, "casefold", NULL);
        if (!t) return -1;
        if (!PyUnicode_CheckExact(t)) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_TypeError, "casefold() did not return a str");
            return -1;
        }
        int kind = PyUnicode_KIND(t);
        const void *data = PyUnicode_DATA(t);
        Py_ssize_t n = PyUnicode_GET_LENGTH(t);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (Py_UNICODE_ISSPACE(c)) {
                gap = 1;
                continue;
            }
            if (gap && any) h = fold_mix(h, ' ');
            gap = 0;
            any = 1;
            h = fold_mix(h, c);
        }
        Py_DECREF(t);
    }
    *out = h;
    return 0;
}

/* The value fold_hash returns for the chain h. */
static inline uint64_t
fold_final(uint64_t h)
{
    return fold_hash_final(h);
}

static PyObject *
fold_hash_impl(PyObject *text, int direct)
{
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "fold_hash() takes a str");
        return NULL;
    }
    uint64_t h;
    if (fold_hash_chain(text, direct, &h) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(fold_final(h));
}

static PyObject *
fold_hash(PyObject *self, PyObject *text)
{
    return fold_hash_impl(text, 0);
}

PyDoc_STRVAR(fold_hash_direct_doc,
"fold_hash_direct(text) -> int\n\n"
"fold_hash(text), the same value; a text that is not ASCII is folded code point by\n"
"code point as str.casefold maps them, without building its casefold() (CPython\n"
"before 3.13; casefold() otherwise). O(len(text)).");

static PyObject *
fold_hash_direct(PyObject *self, PyObject *text)
{
    return fold_hash_impl(text, 1);
}


PyDoc_STRVAR(lower_text_doc,
"lower_text(text) -> str\n\n"
"text.lower(), equal to it for every str (a new str, as str.lower makes): an ASCII\n"
"code point lowered by a table, any other by\n"
"_PyUnicode_ToLowerFull as str.lower does, one with a capital sigma (whose lower case\n"
"depends on its neighbours) by str.lower itself. TypeError for anything but an exact\n"
"str. O(len(text)).");

static PyObject *
lower_text(PyObject *self, PyObject *text)
{
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "lower_text() takes a str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        /* str.lower's own C function (found at import), else the table. */
        if (str_lower_fn) return str_lower_fn(text, NULL);
        const Py_UCS1 *s = PyUnicode_1BYTE_DATA(text);
        PyObject *out = PyUnicode_New(n, 127);
        if (!out) return NULL;
        Py_UCS1 *d = PyUnicode_1BYTE_DATA(out);
        for (Py_ssize_t i = 0; i < n; i++) d[i] = lower_tab[s[i]];
        return out;
    }
#if PY_VERSION_HEX >= 0x030D0000
    /* _PyUnicode_ToLowerFull is not exported from CPython 3.13 on. */
    return PyObject_CallMethod(text, "lower", NULL);
#else
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_UCS4 *buf = PyMem_Malloc(sizeof(Py_UCS4) * 3 * (size_t)n);
    if (!buf) return PyErr_NoMemory();
    Py_ssize_t m = 0;
    Py_UCS4 maxchar = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128) {
            buf[m++] = lower_tab[c];
            continue;
        }
        if (c == 0x3A3) { /* the final sigma's context: str.lower's own work */
            PyMem_Free(buf);
            return PyObject_CallMethod(text, "lower", NULL);
        }
        Py_UCS4 mapped[3];
        int k = _PyUnicode_ToLowerFull(c, mapped);
        for (int j = 0; j < k; j++) {
            if (mapped[j] > maxchar) maxchar = mapped[j];
            buf[m++] = mapped[j];
        }
    }
    PyObject *out = PyUnicode_New(m, maxchar < 128 ? 127 : maxchar);
    if (out) {
        int ok = PyUnicode_KIND(out);
        void *od = PyUnicode_DATA(out);
        if (ok == PyUnicode_1BYTE_KIND) {
            for (Py_ssize_t i = 0; i < m; i++) ((Py_UCS1 *)od)[i] = (Py_UCS1)buf[i];
        } else if (ok == PyUnicode_2BYTE_KIND) {
            for (Py_ssize_t i = 0; i < m; i++) ((Py_UCS2 *)od)[i] = (Py_UCS2)buf[i];
        } else {
            memcpy(od, buf, sizeof(Py_UCS4) * (size_t)m);
        }
    }
    PyMem_Free(buf);
    return out;
#endif
}

PyDoc_STRVAR(dup_key_doc,
"dup_key(namespace, category, text, key, value) -> int\n\n"
"The state's duplicate key, hash((namespace, category, fold_hash(text), key, value))\n"
"& 0x3FFF_FFFF (state._dup_key's formula), in one call: text an exact str (TypeError\n"
"otherwise), the other four any hashable objects. O(len(text)).");

/* hash((namespace, category, folded, key, value)) & 0x3FFF_FFFF for args[0], args[1],
 * args[3], args[4]; steals `folded`. */
static PyObject *
dup_key_tuple(PyObject *const *args, PyObject *folded)
{
    PyObject *t = PyTuple_New(5);
    if (!t) {
        Py_DECREF(folded);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, Py_NewRef(args[0]));
    PyTuple_SET_ITEM(t, 1, Py_NewRef(args[1]));
    PyTuple_SET_ITEM(t, 2, folded);
    PyTuple_SET_ITEM(t, 3, Py_NewRef(args[3]));
    PyTuple_SET_ITEM(t, 4, Py_NewRef(args[4]));
    Py_hash_t h = PyObject_Hash(t);
    Py_DECREF(t);
    if (h == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong((long)(h & 0x3FFFFFFF));
}

static PyObject *
dup_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "dup_key() takes 5 arguments");
        return NULL;
    }
    PyObject *folded = fold_hash_impl(args[2], 2);
    if (!folded) return NULL;
    return dup_key_tuple(args, folded);
}

PyDoc_STRVAR(dup_key_folded_doc,
"dup_key_folded(namespace, category, text, key, value, fold) -> int\n\n"
"dup_key(namespace, category, text, key, value), the same value, where `fold` (an int)\n"
"is fold_hash(text) already computed (the row reader's thread computes it for an ASCII\n"
"text), or any int outside [0, 2**62) when it was not (then computed here). The caller\n"
"vouches that a fold in range is the text's. text an exact str, fold an int\n"
"(TypeError otherwise). O(1) with a fold, else O(len(text)).");

static PyObject *
dup_key_folded(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "dup_key_folded() takes 6 arguments");
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "fold_hash() takes a str");
        return NULL;
    }
    PyObject *fold = args[5];
    if (!PyLong_CheckExact(fold)) {
        PyErr_SetString(PyExc_TypeError, "dup_key_folded(): fold must be an int");
        return NULL;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(fold, &overflow);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (!overflow && v >= 0 && (unsigned long long)v < (1ull << 62))
        return dup_key_tuple(args, Py_NewRef(fold));
    PyObject *folded = fold_hash_impl(args[2], 2);
    if (!folded) return NULL;
    return dup_key_tuple(args, folded);
}

PyDoc_STRVAR(fold_hash_table_doc,
"fold_hash_table(text) -> int\n\n"
"fold_hash_direct(text), the same value; an ASCII text read through a table (one load\n"
"a byte for its whitespace and case). O(len(text)).");

static PyObject *
fold_hash_table(PyObject *self, PyObject *text)
{
    return fold_hash_impl(text, 2);
}

/* ------------------------------------------------------------------ ranking */

/* A group to visit (visit_heap, visit_pop): its bound, smallest seq, number and score
 * part, four 8-byte slots of the caller's int64 heap buffer. */
struct vcand {
    double b;
    int64_t s;
    int64_t g;
    double p;
};

/* x is visited before y: a higher bound, or the same and a smaller seq. */
static inline int
vbefore(const struct vcand *x, const struct vcand *y)
{
    return x->b > y->b || (x->b == y->b && x->s < y->s);
}

static void
vsift(struct vcand *h, Py_ssize_t m, Py_ssize_t i)
{
    struct vcand x = h[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && vbefore(&h[c + 1], &h[c])) c++;
        if (!vbefore(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

PyDoc_STRVAR(visit_heap_doc,
"visit_heap(idx, maxrel, minseq, part, parts, has_kth, kth, kth_seq, heap) -> int\n\n"
"The groups idx (int64) to visit, as a binary heap in heap (int64, writable, at least\n"
"4 * len(idx)) ordered by bound, highest first, then smallest seq: group g's bound is\n"
"((0.5 * maxrel[g] + p) + 0.0) + 0.1 (maxrel float64, p = parts[i] (float64, as long\n"
"as idx) or part when parts is None), its seq minseq[g] (int64). With has_kth only\n"
"those whose bound is above kth, or equal with a seq below kth_seq. Returns how many\n"
"(read them with visit_pop). With order false (default true) the groups are left in\n"
"idx's order, not a heap (read them with visit_select, or visit_order then visit_pop).\n"
"O(len(idx)).");

/* Rounded as numpy rounds the same expression: no fused multiply-add. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static PyObject *
visit_heap(PyObject *self, PyObject *args)
{
    PyObject *o_i, *o_r, *o_s, *o_ps, *o_h;
    double part, kth;
    int has_kth;
    long long kth_seq;
    int order = 1;
    if (!PyArg_ParseTuple(args, "OOOdOpdLO|p", &o_i, &o_r, &o_s, &part, &o_ps, &has_kth, &kth,
                          &kth_seq, &o_h, &order)) {
        return NULL;
    }
    Py_buffer ib, rb, sb, pb, hb;
    PyObject *result = NULL;
    int have_parts = o_ps != Py_None;
    if (get(o_i, &ib, K_I64, 0, "idx") < 0) return NULL;
    if (get(o_r, &rb, K_F64, 0, "maxrel") < 0) goto e1;
    if (get(o_s, &sb, K_I64, 0, "minseq") < 0) goto e2;
    if (have_parts && get(o_ps, &pb, K_F64, 0, "parts") < 0) goto e3;
    if (get(o_h, &hb, K_I64, 1, "heap") < 0) goto e4;
    Py_ssize_t count = LEN(ib);
    if (LEN(hb) / 4 < count || (have_parts && LEN(pb) != count)) {
        PyErr_SetString(PyExc_ValueError, "heap or parts too short");
        goto done;
    }
    {
        const int64_t *idx = ib.buf, *minseq = sb.buf;
        const double *maxrel = rb.buf, *parts = have_parts ? pb.buf : NULL;
        Py_ssize_t groups = LEN(rb) < LEN(sb) ? LEN(rb) : LEN(sb);
        struct vcand *h = hb.buf;
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            int64_t g = idx[i];
            if (g < 0 || g >= groups) {
                PyErr_SetString(PyExc_ValueError, "a group number beyond maxrel or minseq");
                goto done;
            }
            double p = parts ? parts[i] : part;
            double b = ((0.5 * maxrel[g] + p) + 0.0) + 0.1;
            int64_t s = minseq[g];
            if (has_kth && !(b > kth || (b == kth && s < kth_seq))) continue;
            h[m].b = b;
            h[m].s = s;
            h[m].g = g;
            h[m].p = p;
            m++;
        }
        if (order) {
            for (Py_ssize_t i = m / 2; i-- > 0;) vsift(h, m, i);
        }
        result = PyLong_FromSsize_t(m);
    }
done:
    PyBuffer_Release(&hb);
e4:
    if (have_parts) PyBuffer_Release(&pb);
e3:
    PyBuffer_Release(&sb);
e2:
    PyBuffer_Release(&rb);
e1:
    PyBuffer_Release(&ib);
    return result;
}

PyDoc_STRVAR(visit_pop_doc,
"visit_pop(heap, m, k) -> (list, int)\n\n"
"The first min(k, m) groups of the heap of m from visit_heap, in order (highest bound,\n"
"then smallest seq), as (g, bound, seq, part) tuples, taken out of it; and how many\n"
"are left (the heap's first ones). O(k log m).");

static PyObject *
visit_pop(PyObject *self, PyObject *args)
{
    PyObject *o_h;
    Py_ssize_t m, k;
    if (!PyArg_ParseTuple(args, "Onn", &o_h, &m, &k)) return NULL;
    Py_buffer hb;
    if (get(o_h, &hb, K_I64, 1, "heap") < 0) return NULL;
    PyObject *result = NULL, *list = NULL;
    if (m < 0 || m > LEN(hb) / 4 || k < 0) {
        PyErr_SetString(PyExc_ValueError, "m or k out of range");
        goto done;
    }
    {
        struct vcand *h = hb.buf;
        Py_ssize_t take = k < m ? k : m;
        list = PyList_New(take);
        if (list == NULL) goto done;
        for (Py_ssize_t i = 0; i < take; i++) {
            struct vcand top = h[0];
            h[0] = h[--m];
            if (m > 1) vsift(h, m, 0);
            PyObject *item = Py_BuildValue("(LdLd)", (long long)top.g, top.b,
                                           (long long)top.s, top.p);
            if (item == NULL) goto done;
            PyList_SET_ITEM(list, i, item);
        }
        result = Py_BuildValue("(On)", list, m);
    }
done:
    Py_XDECREF(list);
    PyBuffer_Release(&hb);
    return result;
}

/* A group of the heap buffer as visit_pop's (g, bound, seq, part) tuple: the same
 * objects as Py_BuildValue("(LdLd)") makes, without parsing a format per tuple. */
static PyObject *
vtuple(const struct vcand *c)
{
    PyObject *t = PyTuple_New(4);
    if (t == NULL) return NULL;
    PyObject *x[4] = {PyLong_FromLongLong((long long)c->g), PyFloat_FromDouble(c->b),
                      PyLong_FromLongLong((long long)c->s), PyFloat_FromDouble(c->p)};
    int ok = 1;
    for (int j = 0; j < 4; j++) {
        if (x[j] == NULL) ok = 0;
        PyTuple_SET_ITEM(t, j, x[j]); /* NULL items are skipped by the tuple's dealloc */
    }
    if (!ok) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

/* A group selected by visit_select: a copy of it and its position in the buffer. */
struct vsel {
    struct vcand c;
    Py_ssize_t at;
};

/* The worst-first heap of the selected groups t[0:m]: the root is the one visited last
 * among them. */
static void
vsel_sift(struct vsel *t, Py_ssize_t m, Py_ssize_t i)
{
    struct vsel x = t[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && vbefore(&t[c].c, &t[c + 1].c)) c++;
        if (!vbefore(&x.c, &t[c].c)) break;
        t[i] = t[c];
        i = c;
    }
    t[i] = x;
}

static int
pos_desc(const void *a, const void *b)
{
    Py_ssize_t x = ((const struct vsel *)a)->at, y = ((const struct vsel *)b)->at;
    return (x < y) - (x > y);
}

PyDoc_STRVAR(visit_select_doc,
"visit_select(heap, m, k) -> (list, int)\n\n"
"The first min(k, m) of the m groups of heap from visit_heap(..., order=False) (in any\n"
"order, not a heap), in visit order (highest bound, then smallest seq), as visit_pop's\n"
"(g, bound, seq, part) tuples, taken out of it; and how many are left (the buffer's\n"
"first ones, in no order: visit_order makes them a heap for visit_pop). Groups of the\n"
"same bound and seq come in some order, as from visit_pop. O(m + k log k).");

static PyObject *
visit_select(PyObject *self, PyObject *args)
{
    PyObject *o_h;
    Py_ssize_t m, k;
    if (!PyArg_ParseTuple(args, "Onn", &o_h, &m, &k)) return NULL;
    Py_buffer hb;
    if (get(o_h, &hb, K_I64, 1, "heap") < 0) return NULL;
    PyObject *result = NULL, *list = NULL;
    struct vsel *sel = NULL;
    if (m < 0 || m > LEN(hb) / 4 || k < 0) {
        PyErr_SetString(PyExc_ValueError, "m or k out of range");
        goto done;
    }
    {
        struct vcand *h = hb.buf;
        Py_ssize_t take = k < m ? k : m;
        list = PyList_New(take);
        if (list == NULL) goto done;
        if (take == m) { /* all of them: as visit_heap and visit_pop would */
            for (Py_ssize_t i = m / 2; i-- > 0;) vsift(h, m, i);
            for (Py_ssize_t i = 0; i < take; i++) {
                struct vcand top = h[0];
                h[0] = h[--m];
                if (m > 1) vsift(h, m, 0);
                PyObject *item = vtuple(&top);
                if (item == NULL) goto done;
                PyList_SET_ITEM(list, i, item);
            }
        } else if (take > 0) {
            sel = PyMem_Malloc(sizeof(struct vsel) * (size_t)take);
            if (sel == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            /* The best `take` seen so far, the worst of them at the root: a later group
             * replaces it only when visited before it. */
            for (Py_ssize_t j = 0; j < take; j++) {
                sel[j].c = h[j];
                sel[j].at = j;
            }
            for (Py_ssize_t j = take / 2; j-- > 0;) vsel_sift(sel, take, j);
            double rb = sel[0].c.b; /* the root's key, kept in registers */
            int64_t rs = sel[0].c.s;
            for (Py_ssize_t i = take; i < m; i++) {
                double b = h[i].b;
                if (b > rb || (b == rb && h[i].s < rs)) { /* vbefore(&h[i], root) */
                    sel[0].c = h[i];
                    sel[0].at = i;
                    vsel_sift(sel, take, 0);
                    rb = sel[0].c.b;
                    rs = sel[0].c.s;
                }
            }
            /* Worst first out of the heap: the list filled from its end. */
            Py_ssize_t left = take;
            while (left) {
                struct vsel x = sel[0];
                sel[0] = sel[left - 1];
                sel[left - 1] = x; /* kept: the positions taken, for below */
                left--;
                if (left > 1) vsel_sift(sel, left, 0);
                PyObject *item = vtuple(&x.c);
                if (item == NULL) goto done;
                PyList_SET_ITEM(list, left, item);
            }
            /* Out of the buffer: from the highest position down, each filled by the last
             * group (never a taken one: those above were moved out already). */
            if (take > 64) {
                qsort(sel, (size_t)take, sizeof(struct vsel), pos_desc);
            } else {
                for (Py_ssize_t j = 1; j < take; j++) { /* insertion sort, few */
                    struct vsel x = sel[j];
                    Py_ssize_t q = j;
                    for (; q > 0 && sel[q - 1].at < x.at; q--) sel[q] = sel[q - 1];
                    sel[q] = x;
                }
            }
            for (Py_ssize_t j = 0; j < take; j++) {
                m--;
                if (sel[j].at != m) h[sel[j].at] = h[m];
            }
        }
        result = Py_BuildValue("(On)", list, m);
    }
done:
    PyMem_Free(sel);
    Py_XDECREF(list);
    PyBuffer_Release(&hb);
    return result;
}

/* x is visited before y in flat_first's order: visit order (vbefore), then the smaller
 * group number (a total order: two groups never compare equal). */
static inline int
fbefore(const struct vcand *x, const struct vcand *y)
{
    return x->b > y->b || (x->b == y->b && (x->s < y->s || (x->s == y->s && x->g < y->g)));
}

/* The worst-first heap of flat_first's best k: the root is the one visited last. */
static void
fworst_sift(struct vcand *t, Py_ssize_t m, Py_ssize_t i)
{
    struct vcand x = t[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && fbefore(&t[c], &t[c + 1])) c++;
        if (!fbefore(&x, &t[c])) break;
        t[i] = t[c];
        i = c;
    }
    t[i] = x;
}

/* flat_first's scan, its arguments and results. */
struct fscan {
    const double *table; /* each count's part, up to top */
    Py_ssize_t top, n_words;
    const double *maxrel;
    const int64_t *minseq;
    Py_ssize_t least, k;
    int has_kth;
    double kth;
    int64_t kth_seq;
    int has_after;
    struct vcand after;
    struct vcand *best; /* room for k: the worst-first heap of the best seen */
    Py_ssize_t kept, m; /* out: groups in best, groups that passed */
    int cut;            /* flat_first's `cut`: skip by count below the root (unfiltered) */
};

/* The bits set in x (< 2**16), without a call (no popcnt instruction assumed). */
static inline Py_ssize_t
popcount16(unsigned x)
{
    x = x - ((x >> 1) & 0x5555u);
    x = (x & 0x3333u) + ((x >> 2) & 0x3333u);
    x = (x + (x >> 4)) & 0x0F0Fu;
    return (Py_ssize_t)((x + (x >> 8)) & 0x1Fu);
}

/* The bound of a group of count c whose maxrel is r, as flat_scan computes it. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static inline double
fbound(const struct fscan *sc, Py_ssize_t c, double r)
{
    double p = c <= sc->top ? sc->table[c] : 0.4 * ((double)c / (double)sc->n_words);
    return ((0.5 * r + p) + 0.0) + 0.1;
}

/* The largest of maxrel[0:n] that is not a NaN (-inf if none): a bound of every
 * group's maxrel that can be compared at all. O(n), two doubles a step with SSE2. */
static double
fmax_rel(const double *maxrel, Py_ssize_t n)
{
    double u = -HUGE_VAL;
    Py_ssize_t g = 0;
#if defined(__SSE2__)
    __m128d a0 = _mm_set1_pd(-HUGE_VAL), a1 = a0;
    for (; g + 4 <= n; g += 4) {
        /* maxpd(x, acc) is acc when x is a NaN: NaNs are passed over */
        a0 = _mm_max_pd(_mm_loadu_pd(maxrel + g), a0);
        a1 = _mm_max_pd(_mm_loadu_pd(maxrel + g + 2), a1);
    }
    double two[2];
    _mm_storeu_pd(two, _mm_max_pd(a0, a1));
    u = two[0] > two[1] ? two[0] : two[1];
#endif
    for (; g < n; g++) {
        if (maxrel[g] > u) u = maxrel[g];
    }
    return u;
}

/* The least count from `c` up whose best bound (maxrel u) is not below the root's
 * bound rb: a group of a smaller count has a bound below rb (the bound rises with the
 * count and with maxrel, rounding included), so it is not kept. `most` (the counts'
 * largest possible value) + 1 when none. O(counts passed over). */
static inline Py_ssize_t
fcut_from(const struct fscan *sc, Py_ssize_t c, double u, double rb, Py_ssize_t most)
{
    while (c <= most && fbound(sc, c, u) < rb) c++;
    return c;
}

/* The groups below n of counts c8 (or c16 when wide) into sc->best; `filtered`: has_kth
 * or has_after may be set (the two are checked only then). Inlined for each constant
 * wide and filtered, so the loop tests neither per group. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static inline __attribute__((always_inline)) void
flat_scan(struct fscan *sc, const uint8_t *c8, const uint16_t *c16, Py_ssize_t n, int wide,
          int filtered)
{
    const double *table = sc->table, *maxrel = sc->maxrel;
    const int64_t *minseq = sc->minseq;
    const Py_ssize_t least = sc->least, k = sc->k, top = sc->top;
    struct vcand *best = sc->best;
    Py_ssize_t kept = 0, m = 0;
    /* the root's key (the worst kept), in registers once the heap is full */
    double rb = 0.0;
    int64_t rs = 0, rg = 0;
    /* With sc->cut (unfiltered only: every group of a count >= least is one of m), once
     * the heap is full a group whose count is below `cut` is counted and passed over
     * unread (fcut_from: its bound is below the root's); `u` bounds every maxrel. */
    const int cutting = !filtered && sc->cut && k > 0;
    const Py_ssize_t most = wide ? 0xFFFF : 0xFF;
    Py_ssize_t cut = least;
    double u = 0.0;
    int have_u = 0;
    for (Py_ssize_t g = 0; g < n; g++) {
        Py_ssize_t c = wide ? c16[g] : c8[g];
        if (cutting && kept == k) {
#if defined(__SSE2__) && defined(__x86_64__)
            if (!wide && cut <= most) {
                /* 16 counts at a time while none reaches the cut: those >= least
                 * counted (unsigned bytes: max(v, t) == v is v >= t) */
                const __m128i tc = _mm_set1_epi8((char)(uint8_t)cut);
                const __m128i tl = _mm_set1_epi8((char)(uint8_t)least);
                const __m128i one = _mm_set1_epi8(1), zero = _mm_setzero_si128();
                __m128i sums = zero; /* whole blocks' counts >= least, two 64-bit sums */
                while (g + 16 <= n) {
                    __m128i v = _mm_loadu_si128((const __m128i *)(c8 + g));
                    unsigned mc = (unsigned)_mm_movemask_epi8(
                        _mm_cmpeq_epi8(_mm_max_epu8(v, tc), v));
                    __m128i el = _mm_cmpeq_epi8(_mm_max_epu8(v, tl), v);
                    if (mc) { /* to the first that reaches it, those before counted */
                        int j = __builtin_ctz(mc);
                        m += popcount16((unsigned)_mm_movemask_epi8(el) & ((1u << j) - 1u));
                        g += j;
                        break;
                    }
                    sums = _mm_add_epi64(sums, _mm_sad_epu8(_mm_and_si128(el, one), zero));
                    g += 16;
                }
                m += (Py_ssize_t)(_mm_cvtsi128_si64(sums) +
                                  _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums)));
                if (g >= n) break;
                c = c8[g];
            }
#endif
            if (c < cut) {
                if (c >= least) m++;
                continue;
            }
        }
        if (c < least) continue;
        double p = c <= top ? table[c] : 0.4 * ((double)c / (double)sc->n_words);
        double b = ((0.5 * maxrel[g] + p) + 0.0) + 0.1;
        int64_t s = minseq[g];
        if (filtered) {
            if (sc->has_kth && !(b > sc->kth || (b == sc->kth && s < sc->kth_seq))) continue;
            if (sc->has_after) {
                const struct vcand *a = &sc->after;
                if (!(a->b > b || (a->b == b && (a->s < s || (a->s == s && a->g < g))))) continue;
            }
        }
        m++;
        if (kept == k) {
            /* before the root (fbefore(x, root)) or not kept */
            if (!(b > rb || (b == rb && (s < rs || (s == rs && g < rg))))) continue;
            if (k == 0) continue;
            struct vcand x = {b, s, g, p};
            best[0] = x;
            fworst_sift(best, kept, 0);
        } else {
            /* sift up into the worst-first heap */
            struct vcand x = {b, s, g, p};
            Py_ssize_t i = kept++;
            while (i > 0) {
                Py_ssize_t up = (i - 1) / 2;
                if (!fbefore(&best[up], &x)) break;
                best[i] = best[up];
                i = up;
            }
            best[i] = x;
        }
        if (kept == k) {
            rb = best[0].b;
            rs = best[0].s;
            rg = best[0].g;
            if (cutting) {
                if (!have_u) { /* once, when the heap is first full */
                    u = fmax_rel(maxrel, n);
                    have_u = 1;
                }
                cut = fcut_from(sc, cut, u, rb, most);
            }
        }
    }
    sc->kept = kept;
    sc->m = m;
}

PyDoc_STRVAR(flat_first_doc,
"flat_first(counts, n, least, n_words, maxrel, minseq, has_kth, kth, kth_seq, k,\n"
"           has_after, after_b, after_s, after_g, cut=False) -> (list, int)\n\n"
"The groups g < n whose count (counts: uint8 or uint16, at least n) is at least least\n"
"(>= 1), each with its score part p = 0.4 * (count / n_words) and its bound\n"
"((0.5 * maxrel[g] + p) + 0.0) + 0.1 (the floats numpy gives), in visit order:\n"
"highest bound, then smallest seq (minseq[g]), then smallest g. With has_kth only\n"
"those whose bound is above kth, or equal with a seq below kth_seq (as visit_heap);\n"
"with has_after only those after (after_b, after_s, after_g) in that order. Returns the\n"
"first min(k, m) of the m such groups as visit_pop's (g, bound, seq, part) tuples, and\n"
"m minus those. No buffer of all m: O(n + m log k). With cut (and neither has_kth nor\n"
"has_after), once k groups are kept a group whose count's best bound (over the largest\n"
"maxrel that is not a NaN) is below the worst kept is counted without reading its\n"
"maxrel or seq, sixteen uint8 counts at a time with SSE2: the same result.");

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static PyObject *
flat_first(PyObject *self, PyObject *args)
{
    PyObject *o_c, *o_r, *o_s;
    Py_ssize_t n, least, n_words, k;
    int has_kth, has_after;
    double kth, after_b;
    long long kth_seq, after_s, after_g;
    int cut = 0;
    if (!PyArg_ParseTuple(args, "OnnnOOpdLnpdLL|p", &o_c, &n, &least, &n_words, &o_r, &o_s,
                          &has_kth, &kth, &kth_seq, &k, &has_after, &after_b, &after_s,
                          &after_g, &cut)) {
        return NULL;
    }
    Py_buffer cb, rb, sb;
    PyObject *result = NULL, *list = NULL;
    struct vcand *best = NULL;
    double *table = NULL;
    if (PyObject_GetBuffer(o_c, &cb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_SetString(PyExc_ValueError, "counts: not a contiguous buffer");
        return NULL;
    }
    int wide = kind_ok(&cb, K_U16);
    if (cb.ndim != 1 || !(wide || kind_ok(&cb, K_U8))) {
        PyErr_SetString(PyExc_ValueError, "counts: wrong element type or shape");
        PyBuffer_Release(&cb);
        return NULL;
    }
    if (check_aligned(&cb, "counts") < 0) {
        PyBuffer_Release(&cb);
        return NULL;
    }
    if (get(o_r, &rb, K_F64, 0, "maxrel") < 0) goto e1;
    if (get(o_s, &sb, K_I64, 0, "minseq") < 0) goto e2;
    if (n < 0 || n > LEN(cb) || n > LEN(rb) || n > LEN(sb) || least < 1 || n_words < 1 ||
        k < 0 || n_words > 65535) {
        PyErr_SetString(PyExc_ValueError, "n, least, n_words or k out of range");
        goto done;
    }
    /* at most n groups pass: room for more is never used (and a k near 2**63, the
     * caller's limit, must not size the heap's allocation) */
    if (k > n) k = n;
    {
        /* Every count's part, as numpy computes counts.astype(float64) / n_words * 0.4. */
        Py_ssize_t top = n_words < 255 ? n_words : 255; /* above: computed where met */
        table = PyMem_Malloc(sizeof(double) * (size_t)(top + 1));
        best = PyMem_Malloc(sizeof(struct vcand) * (size_t)(k > 0 ? k : 1));
        if (table == NULL || best == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t c = 0; c <= top; c++) table[c] = 0.4 * ((double)c / (double)n_words);
        const uint8_t *c8 = cb.buf;
        const uint16_t *c16 = cb.buf;
        const double *maxrel = rb.buf;
        const int64_t *minseq = sb.buf;
        struct vcand after = {after_b, (int64_t)after_s, (int64_t)after_g, 0.0};
        struct fscan sc = {table, top, n_words, maxrel, minseq, least, k, has_kth, kth,
                           (int64_t)kth_seq, has_after, after, best, 0, 0, cut};
        int filtered = has_kth || has_after;
        if (wide) {
            if (filtered) flat_scan(&sc, NULL, c16, n, 1, 1);
            else flat_scan(&sc, NULL, c16, n, 1, 0);
        } else {
            if (filtered) flat_scan(&sc, c8, NULL, n, 0, 1);
            else flat_scan(&sc, c8, NULL, n, 0, 0);
        }
        Py_ssize_t kept = sc.kept, m = sc.m;
        list = PyList_New(kept);
        if (list == NULL) goto done;
        /* Worst first out of the heap: the list filled from its end. */
        for (Py_ssize_t left = kept; left > 0;) {
            struct vcand x = best[0];
            best[0] = best[--left];
            if (left > 1) fworst_sift(best, left, 0);
            PyObject *item = vtuple(&x);
            if (item == NULL) goto done;
            PyList_SET_ITEM(list, left, item);
        }
        result = Py_BuildValue("(On)", list, m - kept);
    }
done:
    PyMem_Free(table);
    PyMem_Free(best);
    Py_XDECREF(list);
    PyBuffer_Release(&sb);
e2:
    PyBuffer_Release(&rb);
e1:
    PyBuffer_Release(&cb);
    return result;
}

PyDoc_STRVAR(visit_order_doc,
"visit_order(heap, m) -> None\n\n"
"Makes the m groups of heap (as visit_heap(..., order=False) or visit_select leave\n"
"them) the binary heap visit_heap makes, for visit_pop. O(m).");

static PyObject *
visit_order(PyObject *self, PyObject *args)
{
    PyObject *o_h;
    Py_ssize_t m;
    if (!PyArg_ParseTuple(args, "On", &o_h, &m)) return NULL;
    Py_buffer hb;
    if (get(o_h, &hb, K_I64, 1, "heap") < 0) return NULL;
    if (m < 0 || m > LEN(hb) / 4) {
        PyErr_SetString(PyExc_ValueError, "m out of range");
        PyBuffer_Release(&hb);
        return NULL;
    }
    struct vcand *h = hb.buf;
    for (Py_ssize_t i = m / 2; i-- > 0;) vsift(h, m, i);
    PyBuffer_Release(&hb);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(wmax_chunks_doc,
"wmax_chunks(wmax, words, per) -> list\n\n"
"The largest of wmax[i * per : min((i + 1) * per, words)] (uint16, at least `words`)\n"
"for each chunk i of `per` words (per > 0), as ints. O(words).");

static PyObject *
wmax_chunks(PyObject *self, PyObject *args)
{
    PyObject *o_w;
    Py_ssize_t words, per;
    if (!PyArg_ParseTuple(args, "Onn", &o_w, &words, &per)) return NULL;
    Py_buffer wb;
    if (get(o_w, &wb, K_U16, 0, "wmax") < 0) return NULL;
    PyObject *result = NULL;
    if (words < 0 || per <= 0 || words > LEN(wb)) {
        PyErr_SetString(PyExc_ValueError, "words or per out of range");
        goto done;
    }
    {
        const uint16_t *w = wb.buf;
        Py_ssize_t chunks = words / per + (words % per != 0);
        PyObject *list = PyList_New(chunks);
        if (list == NULL) goto done;
        for (Py_ssize_t i = 0; i < chunks; i++) {
            Py_ssize_t hi = (i + 1) * per < words ? (i + 1) * per : words;
            unsigned most = 0;
            for (Py_ssize_t j = i * per; j < hi; j++) most = w[j] > most ? w[j] : most;
            PyObject *v = PyLong_FromLong((long)most);
            if (v == NULL) {
                Py_DECREF(list);
                goto done;
            }
            PyList_SET_ITEM(list, i, v);
        }
        result = list;
    }
done:
    PyBuffer_Release(&wb);
    return result;
}

PyDoc_STRVAR(bits_select_chunks_doc,
"bits_select_chunks(planes, np, c, starts, chunk, n, out, wmax) -> (int, int)\n\n"
"bits_select of the chunks of `chunk` groups (a multiple of 64) from each of starts (a\n"
"list of ints, multiples of chunk) in turn, into out (int64) one after the other while\n"
"a chunk's groups fit: (groups written, chunks done). A chunk that does not fit is left\n"
"whole for the next call (the first always fits when len(out) >= chunk). wmax: the\n"
"words' largest counts (uint16, over n groups). O(chunks * chunk / 64 + words read * np).");

static PyObject *
bits_select_chunks(PyObject *self, PyObject *args)
{
    PyObject *o_p, *o_s, *o_out, *o_w;
    Py_ssize_t np, chunk, n;
    unsigned long long c;
    if (!PyArg_ParseTuple(args, "OnKO!nnOO", &o_p, &np, &c, &PyList_Type, &o_s, &chunk, &n,
                          &o_out, &o_w)) {
        return NULL;
    }
    if (n < 0 || chunk <= 0 || chunk % 64) {
        PyErr_SetString(PyExc_ValueError, "chunk/n out of range");
        return NULL;
    }
    Py_buffer pb, ob, wb;
    PyObject *result = NULL;
    if (get(o_w, &wb, K_U16, 0, "wmax") < 0) return NULL;
    if (LEN(wb) < NWORDS(n)) {
        PyErr_SetString(PyExc_ValueError, "wmax too short");
        goto e1;
    }
    if (get_planes(o_p, &pb, np, NWORDS(n), 0) < 0) goto e1;
    if (get(o_out, &ob, K_I64, 1, "out") < 0) goto e2;
    {
        const uint64_t *p = pb.buf;
        const uint16_t *wmax = wb.buf;
        int64_t *out = ob.buf;
        Py_ssize_t room = LEN(ob), k = 0, done = 0, chunks = PyList_GET_SIZE(o_s);
        int pn = (int)np;
        for (; done < chunks; done++) {
            Py_ssize_t glo = PyLong_AsSsize_t(PyList_GET_ITEM(o_s, done));
            if (glo == -1 && PyErr_Occurred()) goto done;
            if (glo < 0 || glo % chunk) {
                PyErr_SetString(PyExc_ValueError, "a start not a multiple of chunk");
                goto done;
            }
            Py_ssize_t ghi = glo < n - chunk ? glo + chunk : n, k0 = k;
            if (glo >= ghi || !(pn >= 64 || (c >> pn) == 0)) continue;
            for (Py_ssize_t w = glo >> 6; w <= (ghi - 1) >> 6; w++) {
                if (wmax[w] < c) continue;
                const uint64_t *pw = p + w * np;
                uint64_t eq = below_n(w, ghi);
                for (int j = 0; eq && j < pn; j++) {
                    eq &= ((c >> j) & 1) ? pw[j] : ~pw[j];
                }
                if (k + __builtin_popcountll(eq) > room) {
                    k = k0;  /* this chunk whole in the next call */
                    goto full;
                }
                while (eq) {
                    out[k++] = (int64_t)(w * 64 + __builtin_ctzll(eq));
                    eq &= eq - 1;
                }
            }
        }
    full:
        result = Py_BuildValue("(nn)", k, done);
    }
done:
    PyBuffer_Release(&ob);
e2:
    PyBuffer_Release(&pb);
e1:
    PyBuffer_Release(&wb);
    return result;
}


/* ------------------------------------------------------------------ decoding rows */

PyDoc_STRVAR(decode_rows_doc,
"decode_rows(rows, start, out, entry_type, fields, categories, tags_of, namespace_of,\n"
"            json_object, one, max_memory, max_key, max_ttl, max_seq) -> int\n\n"
"sqlite_format._decode_checked of rows[start], rows[start + 1], ... appended to out as\n"
"(seq, entry) pairs, up to the first row it declines (not an exact 16-tuple in the\n"
"writer's own form: canonical UUID text, times 'YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00',\n"
"fields in range; or a callable that raised): returns that row's index, or len(rows).\n"
"The caller decodes a declined row in Python (which decides, with its message) and\n"
"calls again after it. entry_type's slots named by fields (the entry's 15 fields in\n"
"_entry._ENTRY_FIELDS' order) are set directly, as entry_of_checked does. O(rows' size).");

/* The UTC datetime of `s`, 'YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00' exactly (what the writer
 * stores, and datetime.fromisoformat makes of it); NULL without an error to decline
 * (anything else, or a date the datetime constructor refuses). */
static PyObject *
utc_time(PyObject *s)
{
    int f[7];
    if (!PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s) ||
        !utc_fields((const char *)PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s), f))
        return NULL;
    PyObject *dt = PyDateTimeAPI->DateTime_FromDateAndTime(
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], PyDateTime_TimeZone_UTC,
        PyDateTimeAPI->DateTimeType);
    if (!dt) PyErr_Clear(); /* out of range: declined, Python gives the error */
    return dt;
}

/* Whether `s` is an exact str of at most `limit` code points that encodes as UTF-8
 * (no lone surrogate), as sqlite_format._checked_text checks. */
static int
checked_text(PyObject *s, Py_ssize_t limit)
{
    if (!PyUnicode_CheckExact(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n > limit) return 0;
    int kind = PyUnicode_KIND(s);
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *d = PyUnicode_2BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            if (d[i] >= 0xD800 && d[i] <= 0xDFFF) return 0;
    } else if (kind == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *d = PyUnicode_4BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            if (d[i] >= 0xD800 && d[i] <= 0xDFFF) return 0;
    }
    return 1;
}

#define ENTRY_FIELDS 15

/* `f(arg)`, or NULL without an error when it raised an Exception (declined). */
static PyObject *
call_declining(PyObject *f, PyObject *arg)
{
    PyObject *r = PyObject_CallOneArg(f, arg);
    if (!r && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return r;
}

/* One row's (seq, entry), or NULL: declined without an error set, or an error that is
 * not an Exception (KeyboardInterrupt...), which the caller passes on. */
static PyObject *
decode_one(PyObject *row, PyTypeObject *type, const Py_ssize_t *off, PyObject *categories,
           PyObject *tags_of, PyObject *namespace_of, PyObject *json_object, PyObject *one,
           Py_ssize_t max_memory, Py_ssize_t max_key, double max_ttl, long long max_seq)
{
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 16) return NULL;
    PyObject *const *f = &PyTuple_GET_ITEM(row, 0);
    PyObject *seq = f[0], *id = f[1], *category = f[2], *memory = f[3], *tags = f[4],
             *ns = f[5], *created = f[6], *relevance = f[7], *count = f[8], *last = f[9],
             *validated = f[10], *key = f[11], *value = f[12], *updated = f[13],
             *ttl = f[14], *expires = f[15];
    int overflow;
    if (!PyLong_CheckExact(seq)) return NULL;
    long long s = PyLong_AsLongLongAndOverflow(seq, &overflow);
    if (overflow || s < 1 || s > max_seq) return NULL;
    if (!PyUnicode_CheckExact(id) || !PyUnicode_IS_ASCII(id)) return NULL;
    char hex[33];
    if (!uuid_digits((const char *)PyUnicode_1BYTE_DATA(id), PyUnicode_GET_LENGTH(id), hex))
        return NULL;
    if (!PyFloat_CheckExact(relevance)) return NULL;
    double rel = PyFloat_AS_DOUBLE(relevance);
    if (!(rel >= 0.0 && rel <= 1.0)) return NULL; /* NaN fails */
    if (rel == 1.0) relevance = one;
    if (!PyLong_CheckExact(count)) return NULL;
    long long c = PyLong_AsLongLongAndOverflow(count, &overflow);
    if (overflow < 0 || (!overflow && c < 0)) return NULL;
    if (!PyLong_CheckExact(validated)) return NULL;
    long long v = PyLong_AsLongLongAndOverflow(validated, &overflow);
    if (overflow || (v != 0 && v != 1)) return NULL;
    if (ttl != Py_None) {
        if (!PyFloat_CheckExact(ttl)) return NULL;
        double t = PyFloat_AS_DOUBLE(ttl);
        if (!(t > 0.0 && t <= max_ttl)) return NULL;
    }
    if (!checked_text(memory, max_memory)) return NULL;
    if (key != Py_None && (!checked_text(key, max_key) || PyUnicode_GET_LENGTH(key) == 0))
        return NULL;
    PyObject *cat = PyDict_GetItemWithError(categories, category); /* borrowed */
    if (!cat) {
        /* not a category, or an unhashable value: declined; an interrupt is passed on */
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
        return NULL;
    }
    PyObject *vals[ENTRY_FIELDS] = {NULL};
    PyObject *pair = NULL;
    vals[0] = Py_NewRef(cat);
    vals[1] = Py_NewRef(memory);
    if (!(vals[2] = PyLong_FromString(hex, NULL, 16))) goto fail;
    if (!(vals[4] = utc_time(created))) goto fail;
    if (updated == created ||
        (PyUnicode_CheckExact(updated) && PyUnicode_Compare(updated, created) == 0)) {
        vals[12] = Py_NewRef(vals[4]); /* one object for both, as most rows have */
    } else if (updated == Py_None) {
        vals[12] = Py_NewRef(vals[4]);
    } else {
        if (!(vals[12] = utc_time(updated))) goto fail;
        int lt = PyObject_RichCompareBool(vals[12], vals[4], Py_LT);
        if (lt < 0) goto fail;
        if (lt) Py_SETREF(vals[12], Py_NewRef(vals[4]));
    }
    if (!(vals[3] = call_declining(tags_of, tags))) goto fail;
    vals[5] = Py_NewRef(relevance);
    vals[6] = Py_NewRef(count);
    vals[7] = Py_NewRef(v ? Py_True : Py_False);
    if (!(vals[8] = call_declining(namespace_of, ns))) goto fail;
    if (last == Py_None) vals[9] = Py_NewRef(Py_None);
    else if (!(vals[9] = utc_time(last))) goto fail;
    vals[10] = Py_NewRef(key);
    if (value == Py_None) vals[11] = Py_NewRef(Py_None);
    else if (!(vals[11] = call_declining(json_object, value))) goto fail;
    vals[13] = Py_NewRef(ttl);
    if (expires == Py_None) vals[14] = Py_NewRef(Py_None);
    else if (!(vals[14] = utc_time(expires))) goto fail;
    PyObject *entry = type->tp_alloc(type, 0);
    if (!entry) goto fail;
    for (int i = 0; i < ENTRY_FIELDS; i++) {
        PyObject **slot = (PyObject **)((char *)entry + off[i]);
        Py_XSETREF(*slot, vals[i]); /* steals */
        vals[i] = NULL;
    }
    pair = PyTuple_Pack(2, seq, entry);
    Py_DECREF(entry);
    return pair;
fail:
    for (int i = 0; i < ENTRY_FIELDS; i++) Py_XDECREF(vals[i]);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return NULL;
}

static PyObject *
decode_rows(PyObject *self, PyObject *args)
{
    PyObject *rows, *out, *fields, *categories, *tags_of, *namespace_of, *json_object, *one;
    PyTypeObject *type;
    Py_ssize_t start, max_memory, max_key;
    double max_ttl;
    long long max_seq;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!O!OOOO!nndL", &PyList_Type, &rows, &start,
                          &PyList_Type, &out, &PyType_Type, &type, &PyTuple_Type, &fields,
                          &PyDict_Type, &categories, &tags_of, &namespace_of, &json_object,
                          &PyFloat_Type, &one, &max_memory, &max_key, &max_ttl, &max_seq))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (start < 0 || start > n) {
        PyErr_SetString(PyExc_ValueError, "decode_rows: start out of range");
        return NULL;
    }
    if (PyTuple_GET_SIZE(fields) != ENTRY_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "decode_rows: fields must name the entry's 15 slots");
        return NULL;
    }
    Py_ssize_t off[ENTRY_FIELDS];
    for (int i = 0; i < ENTRY_FIELDS; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name) || !(off[i] = slot_offset(type, name))) {
            PyErr_SetString(PyExc_TypeError,
                            "decode_rows: entry_type has no object slot for a field");
            return NULL;
        }
    }
    if (!(type->tp_flags & Py_TPFLAGS_HAVE_GC) || type->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "decode_rows: entry_type is not a slots class");
        return NULL;
    }
    Py_INCREF(type);
    Py_ssize_t i = start;
    for (; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = Py_NewRef(PyList_GET_ITEM(rows, i));
        PyObject *pair = decode_one(row, type, off, categories, tags_of, namespace_of,
                                    json_object, one, max_memory, max_key, max_ttl, max_seq);
        Py_DECREF(row);
        if (!pair) {
            if (PyErr_Occurred()) {
                Py_DECREF(type);
                return NULL;
            }
            break;
        }
        int rc = PyList_Append(out, pair);
        Py_DECREF(pair);
        if (rc < 0) {
            Py_DECREF(type);
            return NULL;
        }
    }
    Py_DECREF(type);
    return PyLong_FromSsize_t(i);
}


/* ------------------------------------------------------------------ restoring groups */

PyDoc_STRVAR(group_texts_doc,
"group_texts(texts) -> (groups, gids)\n\n"
"The group map of a list of str: groups = {text: group number}, numbered 0, 1, ... by\n"
"first appearance (its keys in that order), and gids the bytes of an int64 array giving\n"
"each text's group number: one dict probe per text (what dict(zip(texts, range(n)))\n"
"then an update of every value cost). A list item that is not an exact str raises\n"
"TypeError. O(len(texts)).");

static PyObject *
group_texts(PyObject *self, PyObject *texts)
{
    if (!PyList_CheckExact(texts)) {
        PyErr_SetString(PyExc_TypeError, "group_texts: texts must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(texts);
    PyObject *gids = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    PyObject *groups = PyDict_New();
    if (!gids || !groups) goto error;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(gids);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(texts) && i < n; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        if (!PyUnicode_CheckExact(text)) {
            PyErr_SetString(PyExc_TypeError, "group_texts: a text is not a str");
            goto error;
        }
        Py_ssize_t next = PyDict_GET_SIZE(groups);
        PyObject *number = PyLong_FromSsize_t(next);
        if (!number) goto error;
        PyObject *have = PyDict_SetDefault(groups, text, number); /* borrowed */
        if (have) out[i] = have == number ? (int64_t)next : (int64_t)PyLong_AsSsize_t(have);
        Py_DECREF(number);
        if (!have) goto error;
    }
    if (PyList_GET_SIZE(texts) != n) { /* a text's __eq__ changed the list: refuse */
        PyErr_SetString(PyExc_RuntimeError, "group_texts: the list changed");
        goto error;
    }
    PyObject *pair = PyTuple_Pack(2, groups, gids);
    Py_DECREF(groups);
    Py_DECREF(gids);
    return pair;
error:
    Py_XDECREF(groups);
    Py_XDECREF(gids);
    return NULL;
}

/* ------------------------------------------------------------------ module */

PyDoc_STRVAR(iso_utc_doc,
"iso_utc(dt) -> str\n\n"
"dt.isoformat(), the same text: formatted here for an exact datetime whose tzinfo\n"
"is datetime.UTC ('YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00'), by dt.isoformat() for\n"
"anything else (its errors too). O(1).");

/* `v` as `width` decimal digits at `p` (v < 10**width). */
static inline void
put_digits(char *p, int v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

static PyObject *
iso_utc(PyObject *self, PyObject *dt)
{
    if (!PyDateTime_CheckExact(dt) || !((PyDateTime_DateTime *)dt)->hastzinfo ||
        PyDateTime_DATE_GET_TZINFO(dt) != PyDateTime_TimeZone_UTC) {
        return PyObject_CallMethod(dt, "isoformat", NULL);
    }
    char buf[40];
    int us = PyDateTime_DATE_GET_MICROSECOND(dt);
    put_digits(buf, PyDateTime_GET_YEAR(dt), 4);
    buf[4] = '-';
    put_digits(buf + 5, PyDateTime_GET_MONTH(dt), 2);
    buf[7] = '-';
    put_digits(buf + 8, PyDateTime_GET_DAY(dt), 2);
    buf[10] = 'T';
    put_digits(buf + 11, PyDateTime_DATE_GET_HOUR(dt), 2);
    buf[13] = ':';
    put_digits(buf + 14, PyDateTime_DATE_GET_MINUTE(dt), 2);
    buf[16] = ':';
    put_digits(buf + 17, PyDateTime_DATE_GET_SECOND(dt), 2);
    int n = 19;
    if (us) {
        buf[n] = '.';
        put_digits(buf + n + 1, us, 6);
        n += 7;
    }
    memcpy(buf + n, "+00:00", 6);
    n += 6;
    PyObject *out = PyUnicode_New(n, 127);
    if (!out) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(out), buf, (size_t)n);
    return out;
}

/* ------------------------------------------------------------------ durable rows */

/* encode_rows: the ``entries`` rows of new records in one pass (sqlite_format's
 * encode_record's direct path, the same tuples). The record and entry classes and
 * their slots' offsets are fixed once by rows_setup (member descriptors of plain
 * object slots of exactly those classes). */
#include <structmember.h>

#define ROW_ENTRY_SLOTS 15
static PyTypeObject *rows_rec_type, *rows_entry_type;
static Py_ssize_t rows_rec_off[4];               /* seq, access, cols, slot */
static int rows_rec_i64; /* seq and slot are int64 fields (the compiled Record), not ints */
static Py_ssize_t rows_entry_off[ROW_ENTRY_SLOTS]; /* see rows_setup's doc */
static PyObject *rows_json_strings, *rows_max_count, *rows_fallback, *rows_s_value_, *rows_s_to_json;

static Py_ssize_t
rows_offset(PyTypeObject *type, PyObject *descr)
{
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
        ((PyDescrObject *)descr)->d_type != type) {
        PyErr_SetString(PyExc_TypeError, "rows_setup: expected a member descriptor of the class");
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READ_RESTRICTED) || m->offset <= 0) {
        PyErr_SetString(PyExc_TypeError, "rows_setup: expected a plain object slot");
        return -1;
    }
    return m->offset;
}

/* The offset of a record's field: an int64 field (T_LONGLONG, the compiled Record's
 * born/died/seq/slot: *i64 = 1) or, as rows_offset, a plain object slot (*i64 = 0);
 * -1 with TypeError for anything else. */
static Py_ssize_t
rec_field_offset(PyTypeObject *type, PyObject *descr, int *i64)
{
    *i64 = 0;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type) && ((PyDescrObject *)descr)->d_type == type) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_LONGLONG && !(m->flags & READ_RESTRICTED) &&
            m->offset > 0 && m->offset + (Py_ssize_t)sizeof(int64_t) <= type->tp_basicsize) {
            *i64 = 1;
            return m->offset;
        }
    }
    return rows_offset(type, descr);
}

#define FIELD_I64(obj, off) (*(int64_t *)((char *)(obj) + (off)))

PyDoc_STRVAR(rows_setup_doc,
"rows_setup(record_type, record_slots, entry_type, entry_slots, json_strings, max_count,\n"
"           fallback)\n\n"
"Fix encode_rows' classes: record_slots the member descriptors (seq, access, cols,\n"
"slot; seq and slot both int objects or both int64 fields) of record_type (its entry in slot `slot` of the EntryColumns `cols`), entry_slots those of entry_type's (_id, category, memory, tags,\n"
"namespace, created_at, relevance, access_count, last_accessed, validated, key, value,\n"
"updated_at, ttl, expires_at); json_strings(tuple) -> str; max_count an int;\n"
"fallback(record) -> row for a record encode_rows does not encode itself.\n"
"TypeError, nothing changed, for anything else. O(1).");

static PyObject *
rows_setup(PyObject *self, PyObject *args)
{
    PyObject *rt, *rs, *et, *es, *js, *mc, *fb;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!O:rows_setup", &PyType_Type, &rt, &PyTuple_Type,
                          &rs, &PyType_Type, &et, &PyTuple_Type, &es, &js, &PyLong_Type, &mc,
                          &fb)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(rs) != 4 || PyTuple_GET_SIZE(es) != ROW_ENTRY_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "rows_setup: expected 4 record and 15 entry slots");
        return NULL;
    }
    if (!PyCallable_Check(js) || !PyCallable_Check(fb)) {
        PyErr_SetString(PyExc_TypeError, "rows_setup: json_strings or fallback not callable");
        return NULL;
    }
    Py_ssize_t roff[4], eoff[ROW_ENTRY_SLOTS];
    int kind[4];
    for (int i = 0; i < 4; i++) {
        if ((roff[i] = rec_field_offset((PyTypeObject *)rt, PyTuple_GET_ITEM(rs, i), &kind[i])) < 0)
            return NULL;
    }
    if (kind[1] || kind[2] || kind[0] != kind[3]) {
        PyErr_SetString(PyExc_TypeError, "rows_setup: seq and slot of one kind, access and cols objects");
        return NULL;
    }
    for (int i = 0; i < ROW_ENTRY_SLOTS; i++) {
        if ((eoff[i] = rows_offset((PyTypeObject *)et, PyTuple_GET_ITEM(es, i))) < 0) return NULL;
    }
    if (!rows_s_value_) {
        rows_s_value_ = PyUnicode_InternFromString("_value_");
        rows_s_to_json = PyUnicode_InternFromString("to_json");
        if (!rows_s_value_ || !rows_s_to_json) return NULL;
    }
    Py_XSETREF(rows_rec_type, (PyTypeObject *)Py_NewRef(rt));
    Py_XSETREF(rows_entry_type, (PyTypeObject *)Py_NewRef(et));
    Py_XSETREF(rows_json_strings, Py_NewRef(js));
    Py_XSETREF(rows_max_count, Py_NewRef(mc));
    Py_XSETREF(rows_fallback, Py_NewRef(fb));
    memcpy(rows_rec_off, roff, sizeof roff);
    memcpy(rows_entry_off, eoff, sizeof eoff);
    rows_rec_i64 = kind[0];
    Py_RETURN_NONE;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* iso_utc(v), or None for None (a new reference). */
static PyObject *
rows_iso_or_none(PyObject *v)
{
    return v == Py_None ? Py_NewRef(Py_None) : iso_utc(NULL, v);
}

/* The row of `rec`, a new reference; Py_None (new) when it needs encode_record
 * (another class, access bookkeeping, an unset slot, a store that is not an
 * EntryColumns of rows_setup's entry class or a slot not live in it, an id that is not
 * an int in [0, 2**128)); NULL with an exception when a call raised. The entry is
 * built from the store (EntryColumns.entry) and read as it was stored. */
static PyObject *rows_build(PyObject *seq, PyObject *const *f);

static PyObject *
rows_one(PyObject *rec)
{
    if (Py_TYPE(rec) != rows_rec_type) return Py_NewRef(Py_None);
    PyObject *access = SLOT(rec, rows_rec_off[1]), *c = SLOT(rec, rows_rec_off[2]);
    if (access != Py_None || !c || !Py_IS_TYPE(c, &EntryColumns_Type) ||
        ((EntryColumnsObject *)c)->entry_type != rows_entry_type) {
        return Py_NewRef(Py_None);
    }
    PyObject *seq, *num; /* new references */
    if (rows_rec_i64) {
        seq = PyLong_FromLongLong(FIELD_I64(rec, rows_rec_off[0]));
        num = seq ? PyLong_FromLongLong(FIELD_I64(rec, rows_rec_off[3])) : NULL;
        if (!num) {
            Py_XDECREF(seq);
            return NULL;
        }
    } else {
        seq = SLOT(rec, rows_rec_off[0]), num = SLOT(rec, rows_rec_off[3]);
        if (!seq || !num) return Py_NewRef(Py_None);
        Py_INCREF(seq);
        Py_INCREF(num);
    }
    PyObject *e = ec_entry((EntryColumnsObject *)c, &num, 1);
    Py_DECREF(num);
    if (!e) {
        Py_DECREF(seq);
        if (!PyErr_ExceptionMatches(PyExc_IndexError) && !PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear(); /* no live slot: encode_record's error */
        return Py_NewRef(Py_None);
    }
    /* the fields held for the row's calls (json_strings, to_json: Python code) */
    PyObject *f[ROW_ENTRY_SLOTS];
    int n = 0;
    for (; n < ROW_ENTRY_SLOTS; n++) {
        PyObject *v = SLOT(e, rows_entry_off[n]);
        if (!v) break;
        f[n] = Py_NewRef(v);
    }
    PyObject *row = n == ROW_ENTRY_SLOTS ? rows_build(seq, f) : Py_NewRef(Py_None);
    Py_DECREF(seq);
    for (int i = 0; i < n; i++) Py_DECREF(f[i]);
    Py_DECREF(e);
    return row;
}

static PyObject *
rows_build(PyObject *seq, PyObject *const *f)
{
    PyObject *ident = f[0], *validated = f[9];
    if (!PyLong_CheckExact(ident) || _PyLong_Sign(ident) < 0 ||
        (validated != Py_True && validated != Py_False)) {
        return Py_NewRef(Py_None);
    }
    unsigned char b[16];
    if (long_to_unsigned_bytes(ident, b, 16, 0) < 0) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    static const char hex[] = "0123456789abcdef";
    PyObject *id = PyUnicode_New(36, 127);
    if (!id) return NULL;
    char *p = (char *)PyUnicode_1BYTE_DATA(id);
    for (int i = 0, k = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) p[k++] = '-';
        p[k++] = hex[b[i] >> 4];
        p[k++] = hex[b[i] & 15];
    }
    PyObject *row = PyTuple_New(16);
    if (!row) {
        Py_DECREF(id);
        return NULL;
    }
    PyObject *v;
    PyTuple_SET_ITEM(row, 0, Py_NewRef(seq));
    PyTuple_SET_ITEM(row, 1, id);
    if (!(v = PyObject_GetAttr(f[1], rows_s_value_))) goto fail;
    PyTuple_SET_ITEM(row, 2, v);
    PyTuple_SET_ITEM(row, 3, Py_NewRef(f[2]));
    if (!(v = PyObject_CallOneArg(rows_json_strings, f[3]))) goto fail;
    PyTuple_SET_ITEM(row, 4, v);
    if (!(v = PyObject_CallOneArg(rows_json_strings, f[4]))) goto fail;
    PyTuple_SET_ITEM(row, 5, v);
    PyObject *created = iso_utc(NULL, f[5]);
    if (!created) goto fail;
    PyTuple_SET_ITEM(row, 6, created);
    PyTuple_SET_ITEM(row, 7, Py_NewRef(f[6]));
    int lt = PyObject_RichCompareBool(f[7], rows_max_count, Py_LT);
    if (lt < 0) goto fail;
    PyTuple_SET_ITEM(row, 8, Py_NewRef(lt ? f[7] : rows_max_count));
    if (!(v = rows_iso_or_none(f[8]))) goto fail;
    PyTuple_SET_ITEM(row, 9, v);
    PyTuple_SET_ITEM(row, 10, PyLong_FromLong(validated == Py_True));
    PyTuple_SET_ITEM(row, 11, Py_NewRef(f[10]));
    if (f[11] == Py_None) {
        v = Py_NewRef(Py_None);
    } else if (!(v = PyObject_CallMethodNoArgs(f[11], rows_s_to_json))) {
        goto fail;
    }
    PyTuple_SET_ITEM(row, 12, v);
    if (f[12] == f[5]) {
        v = Py_NewRef(created);
    } else if (!(v = iso_utc(NULL, f[12]))) {
        goto fail;
    }
    PyTuple_SET_ITEM(row, 13, v);
    PyTuple_SET_ITEM(row, 14, Py_NewRef(f[13]));
    if (!(v = rows_iso_or_none(f[14]))) goto fail;
    PyTuple_SET_ITEM(row, 15, v);
    return row;
fail:
    Py_DECREF(row);  /* the items not set yet are NULL: tupledealloc skips them */
    return NULL;
}

PyDoc_STRVAR(encode_rows_doc,
"encode_rows(records) -> list\n\n"
"For each of records (a list), its entries row: encode_record's direct path for a\n"
"record without access bookkeeping (a 16-tuple, built here), rows_setup's fallback(rec)\n"
"for any other (a record or entry of another class than rows_setup's, access\n"
"bookkeeping, an unset slot, an id that is not an int in [0, 2**128)). TypeError if\n"
"records is not a list or rows_setup was not called; what a to_json, json_strings or\n"
"fallback call raises.\n"
"O(len(records)).");

static PyObject *
encode_rows(PyObject *self, PyObject *recs)
{
    if (!PyList_CheckExact(recs)) {
        PyErr_SetString(PyExc_TypeError, "encode_rows: expected a list");
        return NULL;
    }
    if (!rows_rec_type) {
        PyErr_SetString(PyExc_TypeError, "encode_rows: rows_setup was not called");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(recs);
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(recs); i++) {
        PyObject *rec = Py_NewRef(PyList_GET_ITEM(recs, i));
        PyObject *row = rows_one(rec);
        if (row == Py_None) {
            Py_DECREF(row);
            row = PyObject_CallOneArg(rows_fallback, rec);
        }
        Py_DECREF(rec);
        if (!row) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    /* a call that shrank the list left NULL items: fill them with None */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyList_GET_ITEM(out, i)) PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
    }
    return out;
}

/* ------------------------------------------------------------------ the state's inserts */

/* store_inserts: MemoryState._store_batch's inline insert (state.py) for a run of plain
 * entries, without the interpreter. The record, entry and namespace-list classes and
 * their slots' offsets are fixed once by store_setup (member descriptors of plain
 * object slots of exactly those classes, as rows_setup's). It runs no Python code:
 * only dict, set, list, tuple, int, float and str operations on exact built-in types
 * (checked; an entry with a value, whose hash is Python code, is left to the caller),
 * so the structures cannot change under it. */

#define INS_ENTRY_SLOTS 10 /* _id, ttl, key, expires_at, relevance, memory, namespace, category, value, tags */
#define INS_REC_SLOTS 7   /* cols, born, died, seq, access, evkey, slot */
static PyTypeObject *ins_rec_type, *ins_entry_type, *ins_ns_type;
static Py_ssize_t ins_rec_off[INS_REC_SLOTS];
static Py_ssize_t ins_entry_off[INS_ENTRY_SLOTS];
static PyObject *ins_empty; /* the empty tuple (a namespace's default), set by store_setup */
static PyObject *ins_one;   /* the float 1.0 (the relevance most rows have), likewise */
static Py_ssize_t ins_ns_off[2]; /* recs, live */
static PyObject *ins_never, *ins_journal_put, *ins_s_value_;
static int ins_rec_i64;     /* born, died, seq and slot are int64 fields (the compiled Record) */
static int64_t ins_never_v; /* ins_never's value */

/* The slots of `rec`, a record just made by tp_alloc (all NULL), as Record(entry, seq,
 * seq, cols) sets them: cols the state's entry store, slot the number its put gave,
 * born and seq the int `seq`, died NEVER, access and evkey None. New references (none
 * stolen). store_inserts' and load_inserts'. */
static inline void
ins_fill_record(PyObject *rec, PyObject *cols, PyObject *num, PyObject *seq)
{
    const Py_ssize_t *ro = ins_rec_off;
    if (ins_rec_i64) { /* the compiled Record: evkey's state zeroed by tp_alloc (None) */
        int64_t v = (int64_t)PyLong_AsLongLong(seq); /* exact ints in range: no error */
        SLOT(rec, ro[0]) = Py_NewRef(cols);
        FIELD_I64(rec, ro[1]) = v;
        FIELD_I64(rec, ro[2]) = ins_never_v;
        FIELD_I64(rec, ro[3]) = v;
        SLOT(rec, ro[4]) = Py_NewRef(Py_None);
        FIELD_I64(rec, ro[6]) = (int64_t)PyLong_AsLongLong(num);
        return;
    }
    SLOT(rec, ro[0]) = Py_NewRef(cols);
    SLOT(rec, ro[1]) = Py_NewRef(seq);
    SLOT(rec, ro[2]) = Py_NewRef(ins_never);
    SLOT(rec, ro[3]) = Py_NewRef(seq);
    SLOT(rec, ro[4]) = Py_NewRef(Py_None);
    SLOT(rec, ro[5]) = Py_NewRef(Py_None);
    SLOT(rec, ro[6]) = Py_NewRef(num);
}

/* The live slot of a record of store_setup's class in its entry store (the record's
 * `cols`, an EntryColumns, and its `slot`, an int), the store in *cols; NULL, no
 * exception, for anything else (another store, an unset slot, a slot not live: the
 * caller leaves such a record to its Python path). */
static inline EcSlot *
ins_rec_slot(PyObject *rec, EntryColumnsObject **cols)
{
    PyObject *c = SLOT(rec, ins_rec_off[0]);
    if (!c || !Py_IS_TYPE(c, &EntryColumns_Type)) return NULL;
    EntryColumnsObject *ec = (EntryColumnsObject *)c;
    EcSlot *e = ec_rec_slot(ec, rec, ins_rec_off[6], ins_rec_i64);
    if (e) *cols = ec;
    return e;
}

/* After an EntryColumns put failed: 1 (the error cleared) when it refused the entry
 * (TypeError, ValueError), 0 for any other error (kept). */
static inline int
ins_refused(void)
{
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
        return 0;
    PyErr_Clear();
    return 1;
}

/* The tags of the entry in slot `e` of `c` (`num` its number), a slot with extras
 * (EC_EXTRA; without them the tags are the empty tuple): borrowed. NULL with an
 * exception on an error. */
static inline PyObject *
ins_slot_tags(EntryColumnsObject *c, const EcSlot *e, PyObject *num)
{
    PyObject *x = PyDict_GetItemWithError(c->extras, num); /* borrowed */
    if (!x) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "EntryColumns: a slot lost its extras");
        return NULL;
    }
    return PyTuple_GET_ITEM(x, 0); /* EC_EXTRAS' first: the tags */
}

/* Whether the text of slot `e` of `c` is the str `t` (by its UTF-8; a str that is not
 * ASCII is encoded: -1 with an exception when that fails for another reason than a
 * lone surrogate, which no stored text has). */
static int
ins_slot_text_is(const EntryColumnsObject *c, const EcSlot *e, PyObject *t)
{
    return ec_text_is(c, e, t); /* (no error: kept as an int for its callers) */
}

/* The offsets of the record's 7 slots (cols, born, died, seq, access, evkey, slot) in
 * roff, and in *i64 whether born/died/seq/slot are int64 fields (the compiled Record:
 * its evkey then a property, left alone: tp_alloc's zeroes read as None). -1 with
 * TypeError for any other layout. */
static int
ins_record_offsets(PyTypeObject *rt, PyObject *rs, Py_ssize_t *roff, int *i64)
{
    int kind[INS_REC_SLOTS];
    for (int i = 0; i < INS_REC_SLOTS; i++) {
        PyObject *d = PyTuple_GET_ITEM(rs, i);
        if (i == 5 && Py_IS_TYPE(d, &PyGetSetDescr_Type) && kind[1]) {
            roff[i] = 0; /* the compiled Record's evkey */
            kind[i] = 1;
            continue;
        }
        if ((roff[i] = rec_field_offset(rt, d, &kind[i])) < 0) return -1;
    }
    if (kind[0] || kind[4] || kind[1] != kind[2] || kind[1] != kind[3] || kind[1] != kind[6] ||
        (!kind[1] && kind[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "store_setup: born, died, seq and slot of one kind, the others objects");
        return -1;
    }
    if (kind[1] && (rt->tp_alloc != PyType_GenericAlloc || (rt->tp_flags & Py_TPFLAGS_HAVE_GC))) {
        PyErr_SetString(PyExc_TypeError, "store_setup: int64 fields need the generic allocator");
        return -1;
    }
    *i64 = kind[1];
    return 0;
}

PyDoc_STRVAR(store_setup_doc,
"store_setup(record_type, record_slots, entry_type, entry_slots, ns_type, ns_slots,\n"
"            never, journal_put)\n\n"
"Fix store_inserts' and add_groups_new's classes: record_slots the member descriptors (cols, born, died,\n"
"seq, access, evkey, slot) of record_type (a record keeps its entry as a slot of its\n"
"EntryColumns store), entry_slots those of entry_type (_id, ttl, key,\n"
"expires_at, relevance, memory, namespace, category, value, tags), ns_slots those of\n"
"ns_type (recs, live); never the int of a live record's died, journal_put the journal's put\n"
"kind. TypeError, nothing changed, for anything else. O(1).");

static PyObject *
store_setup(PyObject *self, PyObject *args)
{
    PyObject *rt, *rs, *et, *es, *nt, *ns, *never, *put;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O:store_setup", &PyType_Type, &rt, &PyTuple_Type,
                          &rs, &PyType_Type, &et, &PyTuple_Type, &es, &PyType_Type, &nt,
                          &PyTuple_Type, &ns, &PyLong_Type, &never, &put)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(rs) != INS_REC_SLOTS || PyTuple_GET_SIZE(es) != INS_ENTRY_SLOTS ||
        PyTuple_GET_SIZE(ns) != 2) {
        PyErr_SetString(PyExc_TypeError, "store_setup: expected 7 record, 10 entry and 2 list slots");
        return NULL;
    }
    if (!PyLong_CheckExact(never)) {
        PyErr_SetString(PyExc_TypeError, "store_setup: never must be an exact int");
        return NULL;
    }
    if (((PyTypeObject *)rt)->tp_itemsize != 0 || ((PyTypeObject *)rt)->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "store_setup: the record class must have slots only");
        return NULL;
    }
    Py_ssize_t roff[INS_REC_SLOTS], eoff[INS_ENTRY_SLOTS], noff[2];
    int i64;
    if (ins_record_offsets((PyTypeObject *)rt, rs, roff, &i64) < 0) return NULL;
    long long never_v = PyLong_AsLongLong(never);
    if (never_v == -1 && PyErr_Occurred()) return NULL;
    for (int i = 0; i < INS_ENTRY_SLOTS; i++) {
        if ((eoff[i] = rows_offset((PyTypeObject *)et, PyTuple_GET_ITEM(es, i))) < 0) return NULL;
    }
    for (int i = 0; i < 2; i++) {
        if ((noff[i] = rows_offset((PyTypeObject *)nt, PyTuple_GET_ITEM(ns, i))) < 0) return NULL;
    }
    if (!ins_s_value_) {
        ins_s_value_ = PyUnicode_InternFromString("_value_");
        if (!ins_s_value_) return NULL;
    }
    Py_XSETREF(ins_rec_type, (PyTypeObject *)Py_NewRef(rt));
    Py_XSETREF(ins_entry_type, (PyTypeObject *)Py_NewRef(et));
    Py_XSETREF(ins_ns_type, (PyTypeObject *)Py_NewRef(nt));
    Py_XSETREF(ins_never, Py_NewRef(never));
    if (!ins_empty && !(ins_empty = PyTuple_New(0))) return NULL;
    if (!ins_one && !(ins_one = PyFloat_FromDouble(1.0))) return NULL;
    Py_XSETREF(ins_journal_put, Py_NewRef(put));
    ins_rec_i64 = i64;
    ins_never_v = (int64_t)never_v;
    memcpy(ins_rec_off, roff, sizeof roff);
    memcpy(ins_entry_off, eoff, sizeof eoff);
    memcpy(ins_ns_off, noff, sizeof noff);
    Py_RETURN_NONE;
}


PyDoc_STRVAR(record_setup_doc,
"record_setup(record_type, record_slots, entry_type, entry_slots)\n\n"
"store_setup's first four arguments alone: what add_groups_new needs (the word-overlap\n"
"index's side, which does not see the state's namespace lists). The same checks.\n"
"O(1).");

static PyObject *
record_setup(PyObject *self, PyObject *args)
{
    PyObject *rt, *rs, *et, *es;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:record_setup", &PyType_Type, &rt, &PyTuple_Type, &rs,
                          &PyType_Type, &et, &PyTuple_Type, &es)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(rs) != INS_REC_SLOTS || PyTuple_GET_SIZE(es) != INS_ENTRY_SLOTS) {
        PyErr_SetString(PyExc_TypeError, "record_setup: expected 7 record and 10 entry slots");
        return NULL;
    }
    if (((PyTypeObject *)rt)->tp_itemsize != 0 || ((PyTypeObject *)rt)->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "record_setup: the record class must have slots only");
        return NULL;
    }
    Py_ssize_t roff[INS_REC_SLOTS], eoff[INS_ENTRY_SLOTS];
    int i64;
    if (ins_record_offsets((PyTypeObject *)rt, rs, roff, &i64) < 0) return NULL;
    for (int i = 0; i < INS_ENTRY_SLOTS; i++) {
        if ((eoff[i] = rows_offset((PyTypeObject *)et, PyTuple_GET_ITEM(es, i))) < 0) return NULL;
    }
    if (ins_rec_type && (ins_rec_type != (PyTypeObject *)rt || ins_entry_type != (PyTypeObject *)et)) {
        /* store_setup's classes: one pair for both functions */
        PyErr_SetString(PyExc_TypeError, "record_setup: other classes than store_setup's");
        return NULL;
    }
    Py_XSETREF(ins_rec_type, (PyTypeObject *)Py_NewRef(rt));
    Py_XSETREF(ins_entry_type, (PyTypeObject *)Py_NewRef(et));
    ins_rec_i64 = i64;
    memcpy(ins_rec_off, roff, sizeof roff);
    memcpy(ins_entry_off, eoff, sizeof eoff);
    Py_RETURN_NONE;
}

/* part | (v << 63) | v (state._relevance_key's layout) as a new int, part's 24
 * little-endian bytes given, 0 <= v < 2**63. */
static PyObject *
ins_relevance_key(const unsigned char *part, uint64_t v)
{
    unsigned char b[24];
    memcpy(b, part, 24);
    uint64_t w0 = v | (v << 63), w1 = v >> 1;
    for (int i = 0; i < 8; i++) {
        b[i] |= (unsigned char)(w0 >> (8 * i));
        b[8 + i] |= (unsigned char)(w1 >> (8 * i));
    }
    return long_from_unsigned_bytes(b, 24, 1);
}

/* hash((namespace, category, fold_hash(text), key, value)) & 0x3FFF_FFFF: dup_key's. */
static PyObject *
ins_dup_key(PyObject *ns, PyObject *cat, PyObject *text, PyObject *key, PyObject *value)
{
    PyObject *args[5] = {ns, cat, text, key, value};
    return dup_key(NULL, args, 5);
}

/* ins_dup_key's value as a C int (for a DupTable: no int object): 0, or -1 with an
 * exception. The same tuple and hash as dup_key_tuple's. */
static int
ins_dup_key_u32(PyObject *ns, PyObject *cat, PyObject *text, PyObject *key, PyObject *value,
                uint32_t *out)
{
    PyObject *folded = fold_hash_impl(text, 2);
    if (!folded) return -1;
    PyObject *t = PyTuple_New(5);
    if (!t) {
        Py_DECREF(folded);
        return -1;
    }
    PyTuple_SET_ITEM(t, 0, Py_NewRef(ns));
    PyTuple_SET_ITEM(t, 1, Py_NewRef(cat));
    PyTuple_SET_ITEM(t, 2, folded);
    PyTuple_SET_ITEM(t, 3, Py_NewRef(key));
    PyTuple_SET_ITEM(t, 4, Py_NewRef(value));
    Py_hash_t h = PyObject_Hash(t);
    Py_DECREF(t);
    if (h == -1 && PyErr_Occurred()) return -1;
    *out = (uint32_t)(h & 0x3FFFFFFF);
    return 0;
}

PyDoc_STRVAR(store_inserts_doc,
"store_inserts(entries, start, version, by_id, prev, rel_part, rel_lists, rel_keys,\n"
"              rel_maxes, rel_split, namespaces, dups, dup_keys, journal, run,\n"
"              run_entries, seq_keys, cols) -> int\n\n"
"MemoryState._store_batch's inline insert of entries[start], entries[start + 1], ...\n"
"(a list or tuple) while each is plain: an exact entry class (store_setup) with no\n"
"ttl, key, value or expires_at, an exact str text, an id with no live record, a relevance\n"
"whose key part rel_part has (an int below 2**190), a namespace namespaces has (an\n"
"exact list class), and a relevance key above rel_maxes[-1] whose last sublist is\n"
"shorter than rel_split. The relevance key is part | (v << 63) | v for the record's\n"
"version v (state._relevance_key), or with seq_keys true (state._relevance_key_seq)\n"
"part | v, the record's own version int when part is 0, or with seq_keys 2\n"
"(state._relevance_key_rec; the compiled record only) the record itself then. The k-th insert makes a record born and seq'd version + k\n"
"(one int), and does what _store_batch's loop does: by_id[id] = rec (by_id a dict or an\n"
"IdTable of the store_setup classes), prev[rec] = the\n"
"dead record of the id if any, the relevance order's last sublists appended and its\n"
"max replaced, the namespace list's recs appended and live + 1, the duplicate group\n"
"(dups, a dict or a DupTable, and dup_keys) joined, rec and entry appended to run and\n"
"run_entries, (JOURNAL_PUT,\n"
"rec) to journal (None: none). The caller counts the inserts by run's growth (the\n"
"state's version, live, stores and the order's length). Returns the index of the\n"
"first entry not inserted (len(entries) when all were). An entry's fallible steps\n"
"(its duplicate key's hashes, the allocations) come before any change for it: an\n"
"error leaves it out and the ones before it inserted. TypeError for wrong argument\n"
"types, RuntimeError before store_setup. O(sum of the texts' lengths).");

static PyObject *
store_inserts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 18) {
        PyErr_SetString(PyExc_TypeError, "store_inserts() takes 18 arguments");
        return NULL;
    }
    if (!ins_rec_type || !ins_ns_type || !ins_never || !ins_journal_put || !ins_s_value_) {
        /* record_setup alone (add_groups_new's) fixes the record and entry classes only */
        PyErr_SetString(PyExc_RuntimeError, "store_inserts: store_setup() not called");
        return NULL;
    }
    int rec_keys = PyLong_CheckExact(args[16]) && PyLong_AsLong(args[16]) == 2;
    if (!PyBool_Check(args[16]) && !rec_keys) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: seq_keys must be a bool or 2");
        return NULL;
    }
    if (rec_keys && !ins_rec_i64) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: seq_keys 2 needs the compiled record");
        return NULL;
    }
    int seq_keys = args[16] == Py_True || rec_keys;
    PyObject *cols = args[17];
    if (!Py_IS_TYPE(cols, &EntryColumns_Type)) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: cols must be an EntryColumns");
        return NULL;
    }
    PyObject *entries = args[0], *by_id = args[3], *prev = args[4], *rel_part = args[5],
             *rel_lists = args[6], *rel_keys = args[7], *rel_maxes = args[8],
             *namespaces = args[10], *dups = args[11], *dup_keys = args[12],
             *journal = args[13], *run = args[14], *run_entries = args[15];
    if (!(PyList_CheckExact(entries) || PyTuple_CheckExact(entries)) ||
        !(PyDict_CheckExact(by_id) || Py_IS_TYPE(by_id, &IdTable_Type)) ||
        !PyDict_CheckExact(prev) || !PyDict_CheckExact(rel_part) ||
        !PyList_CheckExact(rel_lists) || !PyList_CheckExact(rel_keys) ||
        !PyList_CheckExact(rel_maxes) || !PyDict_CheckExact(namespaces) ||
        !(PyDict_CheckExact(dups) || Py_IS_TYPE(dups, &DupTable_Type)) ||
        !PySet_CheckExact(dup_keys) ||
        !(journal == Py_None || PyList_CheckExact(journal)) || !PyList_CheckExact(run) ||
        !PyList_CheckExact(run_entries) || !PyLong_CheckExact(args[1]) ||
        !PyLong_CheckExact(args[2]) || !PyLong_CheckExact(args[9])) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: wrong argument types");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    long long v0 = PyLong_AsLongLong(args[2]);
    if (v0 == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t split = PyLong_AsSsize_t(args[9]);
    if (split == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || v0 < 1) {
        PyErr_SetString(PyExc_ValueError, "store_inserts: start < 0 or version < 1");
        return NULL;
    }
    Py_ssize_t nl = PyList_GET_SIZE(rel_lists);
    if (nl == 0 || nl != PyList_GET_SIZE(rel_keys) || nl != PyList_GET_SIZE(rel_maxes)) {
        return PyLong_FromSsize_t(i); /* an empty order: add's path */
    }
    PyObject *last_recs = PyList_GET_ITEM(rel_lists, nl - 1);
    PyObject *last_keys = PyList_GET_ITEM(rel_keys, nl - 1);
    if (!PyList_CheckExact(last_recs) || !PyList_CheckExact(last_keys)) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: the order's sublists must be lists");
        return NULL;
    }
    const Py_ssize_t *eo = ins_entry_off, *ro = ins_rec_off;
    DupTableObject *table = Py_IS_TYPE(dups, &DupTable_Type) ? (DupTableObject *)dups : NULL;
    IdTableObject *idt = Py_IS_TYPE(by_id, &IdTable_Type) ? (IdTableObject *)by_id : NULL;
    if (idt && (idt->rec_type != ins_rec_type || !idt->cols || idt->entry_off != ro[0] ||
                idt->id_off != ro[6] || idt->slot_i64 != ins_rec_i64)) {
        PyErr_SetString(PyExc_TypeError, "store_inserts: by_id is an IdTable of other classes");
        return NULL;
    }
    uint64_t v = (uint64_t)v0;
    PyObject *part_seen = NULL; /* borrowed: the part whose bytes part_b holds */
    unsigned char part_b[24];
    PyObject *cat_seen = NULL, *cat_value = NULL; /* borrowed: the category's _value_ */
    for (;; i++) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(entries);
        if (i >= n) break;
        PyObject *entry = PySequence_Fast_GET_ITEM(entries, i);
        if (!Py_IS_TYPE(entry, ins_entry_type)) break;
        PyObject *ident = SLOT(entry, eo[0]), *ttl = SLOT(entry, eo[1]), *key = SLOT(entry, eo[2]),
                 *expires = SLOT(entry, eo[3]), *rel = SLOT(entry, eo[4]),
                 *text = SLOT(entry, eo[5]), *ns = SLOT(entry, eo[6]), *cat = SLOT(entry, eo[7]),
                 *value = SLOT(entry, eo[8]);
        if (!ident || !rel || !text || !ns || !cat || !value || ttl != Py_None ||
            key != Py_None || expires != Py_None || value != Py_None ||
            !PyUnicode_CheckExact(text)) {
            break; /* a value's hash is Python code (JsonObject): the loop's */
        }
        if (v >= ((uint64_t)1 << 63)) break;
        if (idt && !PyLong_CheckExact(ident)) break; /* the loop's (its TypeError) */
        PyObject *old = idt ? it_lookup(idt, ident) /* borrowed */
                            : PyDict_GetItemWithError(by_id, ident);
        if (!old && PyErr_Occurred()) return NULL;
        if (old) {
            if (!Py_IS_TYPE(old, ins_rec_type)) break;
            int live;
            if (ins_rec_i64) {
                live = FIELD_I64(old, ro[2]) == ins_never_v;
            } else {
                PyObject *died = SLOT(old, ro[2]);
                if (!died) break;
                live = PyObject_RichCompareBool(died, ins_never, Py_EQ);
                if (live < 0) return NULL;
            }
            if (live) break; /* an upsert: store()'s */
        }
        PyObject *part = PyDict_GetItemWithError(rel_part, rel); /* borrowed */
        if (!part) {
            if (PyErr_Occurred()) return NULL;
            break; /* add's path computes and caches it */
        }
        if (part != part_seen) {
            if (!PyLong_CheckExact(part) || _PyLong_Sign(part) < 0 || _PyLong_NumBits(part) > 190) {
                break;
            }
            if (long_to_unsigned_bytes(part, part_b, 24, 1) < 0) return NULL;
            part_seen = part;
        }
        PyObject *records = PyDict_GetItemWithError(namespaces, ns); /* borrowed */
        if (!records) {
            if (PyErr_Occurred()) return NULL;
            break; /* a new namespace: the sorted namespaces too */
        }
        if (!Py_IS_TYPE(records, ins_ns_type)) break;
        PyObject *recs = SLOT(records, ins_ns_off[0]), *nlive = SLOT(records, ins_ns_off[1]);
        if (!recs || !nlive || !PyList_CheckExact(recs) || !PyLong_CheckExact(nlive)) break;
        if (PyList_GET_SIZE(last_keys) >= split) break; /* add splits the sublist */
        if (cat != cat_seen) {
            PyObject *cv = PyObject_GetAttr(cat, ins_s_value_);
            if (!cv) return NULL;
            Py_DECREF(cv); /* the enum member keeps its value */
            cat_seen = cat;
            cat_value = cv;
        }
        /* The fallible steps, before any change for this entry. */
        PyObject *born = PyLong_FromUnsignedLongLong(v);
        if (!born) return NULL;
        PyObject *rkey;
        if (!seq_keys) {
            rkey = ins_relevance_key(part_b, v);
        } else if (_PyLong_Sign(part) == 0) {
            /* the seq int itself: no key object; with rec_keys the record, made below
             * (the int compares with the order's keys as the record will) */
            rkey = Py_NewRef(born);
        } else {
            rkey = PyNumber_Or(part, born);
        }
        if (!rkey) {
            Py_DECREF(born);
            return NULL;
        }
        PyObject *last_max = PyList_GET_ITEM(rel_maxes, nl - 1);
        int above = PyObject_RichCompareBool(rkey, last_max, Py_GT);
        if (above <= 0) {
            Py_DECREF(rkey);
            Py_DECREF(born);
            if (above < 0) return NULL;
            break;
        }
        /* The duplicate key: an int for a dict, a C int for a DupTable (room made). */
        PyObject *dkey = NULL;
        uint32_t dkey32 = 0;
        int dfail = table ? ins_dup_key_u32(ns, cat_value, text, Py_None, value, &dkey32) < 0 ||
                                dt_reserve(table, 1) < 0
                          : !(dkey = ins_dup_key(ns, cat_value, text, Py_None, value));
        if (!dfail && idt) dfail = it_reserve(idt, 1) < 0; /* it_put cannot fail then */
        if (dfail) {
            Py_DECREF(rkey);
            Py_XDECREF(dkey);
            Py_DECREF(born);
            return NULL;
        }
        Py_ssize_t nl0 = PyLong_AsSsize_t(nlive);
        if (nl0 == -1 && PyErr_Occurred()) {
            Py_DECREF(rkey);
            Py_XDECREF(dkey);
            Py_XDECREF(born);
            return NULL;
        }
        PyObject *live1 = PyLong_FromSsize_t(nl0 + 1);
        PyObject *rec = ins_rec_type->tp_alloc(ins_rec_type, 0);
        PyObject *jt = journal == Py_None ? NULL : PyTuple_New(2);
        /* the entry into the store last: nothing fails after it */
        PyObject *num = live1 && rec && (journal == Py_None || jt)
                            ? ec_put((EntryColumnsObject *)cols, entry)
                            : NULL;
        if (!num) {
            /* an entry the store refuses (an id past 128 bits, a lone surrogate): the
             * caller's path raises its error */
            int refused = live1 && rec && (journal == Py_None || jt) && ins_refused();
            Py_DECREF(rkey);
            Py_XDECREF(dkey);
            Py_XDECREF(born);
            Py_XDECREF(live1);
            Py_XDECREF(rec);
            Py_XDECREF(jt);
            if (refused) break;
            return NULL;
        }
        ins_fill_record(rec, cols, num, born); /* Record(entry, version, version, cols) */
        Py_DECREF(num);
        Py_DECREF(born);
        if (rec_keys && rkey == born) Py_SETREF(rkey, Py_NewRef(rec)); /* its own key */
        if (jt) {
            PyTuple_SET_ITEM(jt, 0, Py_NewRef(ins_journal_put));
            PyTuple_SET_ITEM(jt, 1, Py_NewRef(rec));
        }
        /* The changes: only an allocation failing inside a container can stop them
         * midway (as it could in the Python loop). */
        int err = idt ? it_put(idt, ident, rec) : PyDict_SetItem(by_id, ident, rec);
        if (!err && old) err = PyDict_SetItem(prev, rec, old);
        if (!err) err = PyList_Append(last_recs, rec);
        if (!err) err = PyList_Append(last_keys, rkey);
        if (!err) err = PyList_SetItem(rel_maxes, nl - 1, Py_NewRef(rkey));
        if (!err) err = PyList_Append(recs, rec);
        if (!err) Py_SETREF(SLOT(records, ins_ns_off[1]), Py_NewRef(live1));
        if (!err && table) {
            int pair = dt_join(table, dkey32, rec); /* dt_reserve made room */
            err = pair < 0 ? -1 : 0;
            if (pair == 1) {
                dkey = PyLong_FromUnsignedLong(dkey32);
                err = dkey ? PySet_Add(dup_keys, dkey) : -1;
            }
        } else if (!err) {
            PyObject *group = PyDict_GetItemWithError(dups, dkey); /* borrowed */
            if (!group) {
                err = PyErr_Occurred() ? -1 : PyDict_SetItem(dups, dkey, rec);
            } else if (PyDict_Check(group)) {
                err = PyDict_SetItem(group, rec, Py_None);
            } else {
                PyObject *pair = PyDict_New();
                err = pair ? 0 : -1;
                if (!err) err = PyDict_SetItem(pair, group, Py_None);
                if (!err) err = PyDict_SetItem(pair, rec, Py_None);
                if (!err) err = PyDict_SetItem(dups, dkey, pair);
                if (!err) err = PySet_Add(dup_keys, dkey);
                Py_XDECREF(pair);
            }
        }
        if (!err) err = PyList_Append(run, rec);
        if (!err) err = PyList_Append(run_entries, entry);
        if (!err && jt) err = PyList_Append(journal, jt);
        Py_DECREF(rkey);
        Py_XDECREF(dkey);
        Py_DECREF(live1);
        Py_DECREF(rec);
        Py_XDECREF(jt);
        if (err) return NULL;
        v++;
    }
    return PyLong_FromSsize_t(i);
}


/* load_inserts: MemoryState._load_bulk's per-row loop (state.py) for a run of plain
 * rows of an unbounded state, without the interpreter: the records made by tp_alloc,
 * the id table, the namespace lists, the duplicate groups and the relevance keys in
 * one pass. Like store_inserts it runs no Python code (exact built-in types only; a
 * row that would need any is left to the caller), so nothing changes under it. */

PyDoc_STRVAR(load_inserts_doc,
"load_inserts(rows, start, folds, last, by_id, namespaces, dups, dup_keys, records,\n"
"             exact, rel_parts, keys, cols[, rec_keys]) -> int\n\n"
"MemoryState._load_bulk's loop for rows[start], rows[start + 1], ... (rows a list, or a\n"
"list subclass's own items, of (seq, entry) tuples) while each is plain: an exact 2-tuple of an exact int seq in\n"
"(last, 2**63) (last the previous row's seq, an int) and an entry of store_setup's\n"
"class with no key, value or expires_at, an exact str text, an exact float relevance\n"
"that rel_parts (dict: relevance -> its part of the seq-layout key, an int >= 0) has,\n"
"an id by_id (an IdTable of store_setup's classes) does not have, and a namespace\n"
"namespaces (dict) has as a store_setup namespace list. For each such row: rec =\n"
"Record(entry, seq, seq, cols) (the entry put in cols, an EntryColumns, the record\n"
"keeping its slot; born and seq the row's int, died NEVER, access and evkey None), by_id[id] = rec, rec appended to records and to its namespace list's recs (live\n"
"+ 1), entry to exact (a list, or None: not kept), the relevance key (seq itself for a\n"
"part of 0, the record itself then when rec_keys is true (state._relevance_key_rec;\n"
"the compiled record only), else part | seq) to keys, and rec joined to its duplicate group in dups (a\n"
"DupTable; the group's key added to dup_keys when it became a pair). The duplicate key\n"
"is dup_key_folded's with folds[8 i : 8 i + 8] (native uint64) as row i's fold when\n"
"folds is bytes of 8 * len(rows), else (None) the text folded here. Returns the index\n"
"of the first row not loaded (len(rows) when all were): the caller loads that row\n"
"itself (or raises its error: a seq not above the last, an id twice). A row's fallible\n"
"steps come before any change for it: an error leaves it out and the rows before it\n"
"loaded. TypeError for wrong argument types, RuntimeError before store_setup.\n"
"O(rows + the texts folded here).");

/* Rows load_inserts looks ahead (0: none) and its ring of what it found (a power of
 * two above LOAD_AHEAD). */
#ifndef LOAD_AHEAD
#define LOAD_AHEAD 8
#endif
#define LOAD_RING 16
#if defined(__GNUC__) || defined(__clang__)
#define LOAD_PREFETCH(p) __builtin_prefetch(p)
#else
#define LOAD_PREFETCH(p) ((void)(p))
#endif

typedef struct {
    Py_ssize_t row;  /* the row this slot describes, -1: none */
    PyObject *entry; /* borrowed: its entry, to tell the slot is still that row's */
    uint32_t dkey;   /* its duplicate key, when has_dkey */
    int has_dkey;
} LoadAhead;

/* The duplicate key of a plain row, hash((ns, cat_value, fold, None, None)) &
 * 0x3FFF_FFFF, without the tuple and the fold's int (load_inserts: two objects made
 * and freed a row, ~1M at an open): tuplehash's xxHash lanes (Objects/tupleobject.c,
 * CPython 3.8 and later) over the items' hashes, an int's hash being its value modulo
 * 2**61 - 1 (Python/pyhash.c) for a fold in [0, 2**62). Used only once dkey_direct_ok
 * found it equal to the tuple's hash on sample tuples in this process (else the
 * tuple, as before). */
#define DKEY_XXPRIME_1 11400714785074694791ULL
#define DKEY_XXPRIME_2 14029467366897019727ULL
#define DKEY_XXPRIME_5 2870177450012600261ULL

static inline uint64_t
dkey_lane(uint64_t acc, uint64_t lane)
{
    acc += lane * DKEY_XXPRIME_2;
    acc = (acc << 31) | (acc >> 33);
    return acc * DKEY_XXPRIME_1;
}

/* hash(v) of an int v in [0, 2**62) (on a 64-bit Py_hash_t). */
static inline uint64_t
dkey_int_hash(uint64_t v)
{
    const uint64_t m = ((uint64_t)1 << 61) - 1;
    uint64_t x = (v & m) + (v >> 61);
    return x >= m ? x - m : x;
}

/* hash((ns, cat_value, fold, None, None)): -1 with an error set (ns's hash failed). */
static Py_hash_t
dkey_direct(PyObject *ns, PyObject *cat_value, uint64_t fold)
{
    Py_hash_t hn = PyObject_Hash(ns), hc = PyObject_Hash(cat_value), h0 = PyObject_Hash(Py_None);
    if (hn == -1 || hc == -1 || h0 == -1) return -1;
    uint64_t acc = DKEY_XXPRIME_5;
    acc = dkey_lane(acc, (uint64_t)hn);
    acc = dkey_lane(acc, (uint64_t)hc);
    acc = dkey_lane(acc, dkey_int_hash(fold));
    acc = dkey_lane(acc, (uint64_t)h0);
    acc = dkey_lane(acc, (uint64_t)h0);
    acc += (uint64_t)5 ^ (DKEY_XXPRIME_5 ^ 3527539UL);
    return acc == (uint64_t)-1 ? 1546275796 : (Py_hash_t)acc;
}

/* Whether dkey_direct gives the tuple's hash here (checked once, on folds at the ends
 * of the range and between, a namespace of 0-2 parts and a category): 1 or 0. Never
 * fails (an error is cleared: 0). Needs the GIL. */
static int dkey_direct_state = -1; /* -1 unknown, 0 no, 1 yes */
static int dkey_direct_on = 1;     /* dkey_direct(False): the tuple, the path before */

static int
dkey_direct_ok(void)
{
    if (!dkey_direct_on) return 0;
    if (dkey_direct_state >= 0) return dkey_direct_state;
    int ok = sizeof(Py_hash_t) == 8 && sizeof(Py_uhash_t) == 8;
    const uint64_t folds[] = {0, 1, 12345, ((uint64_t)1 << 61) - 2, ((uint64_t)1 << 61) - 1,
                              (uint64_t)1 << 61, ((uint64_t)1 << 62) - 1, 0x2545F4914F6CDD1DULL >> 2};
    PyObject *nss[3] = {PyTuple_New(0), Py_BuildValue("(s)", "a"), Py_BuildValue("(ss)", "b", "c")};
    PyObject *cat = PyUnicode_FromString("fact");
    for (int i = 0; ok && i < 3; i++) {
        for (size_t j = 0; ok && j < sizeof folds / sizeof *folds; j++) {
            PyObject *fold = PyLong_FromUnsignedLongLong(folds[j]);
            PyObject *t = nss[i] && cat && fold ? PyTuple_Pack(5, nss[i], cat, fold, Py_None, Py_None)
                                               : NULL;
            Py_hash_t want = t ? PyObject_Hash(t) : -1;
            ok = t && want != -1 && dkey_direct(nss[i], cat, folds[j]) == want;
            Py_XDECREF(t);
            Py_XDECREF(fold);
        }
    }
    for (int i = 0; i < 3; i++) Py_XDECREF(nss[i]);
    Py_XDECREF(cat);
    if (PyErr_Occurred()) PyErr_Clear();
    return dkey_direct_state = ok;
}

PyDoc_STRVAR(dkey_direct_knob_doc,
"dkey_direct(on) -> bool\n\n"
"Whether load_inserts computes a plain row's duplicate key from the items' hashes\n"
"(tuplehash's steps, once checked against real tuples in this process) instead of\n"
"hashing a tuple it makes (False: the path before, branch open31). The same keys.\n"
"Sets it (on: a bool) and returns what it was. TypeError for a non-bool. O(1).");

PyDoc_STRVAR(group_ahead_doc,
"group_ahead(on) -> bool\n\n"
"Whether GroupTable.index_from takes the tags of the texts 8 numbers on and asks for\n"
"their home slots ahead (True, the default from branch open31), or one text at a time\n"
"(False: the path before; the same table). Sets it (on: a bool) and returns what it\n"
"was. TypeError for a non-bool. O(1).");

static PyObject *
group_ahead(PyObject *self, PyObject *on)
{
    return bool_knob(&gt_ahead_on, on, "group_ahead: on must be a bool");
}

PyDoc_STRVAR(texts_ascii_hashes_doc,
"texts_ascii_hashes(on) -> bool\n\n"
"Whether texts_first and texts_groups, given texts not all with a cached hash, take\n"
"each ASCII text's str hash (its cached one, else computed from its bytes as str's hash\n"
"does, without the GIL and without caching it) and hash only the others' data (True,\n"
"the default from branch open33), or hash every text's data then (False: the path\n"
"before). The same results. Sets it (on: a bool) and returns what it was. TypeError\n"
"for a non-bool. O(1).");

static PyObject *
dkey_direct_knob(PyObject *self, PyObject *on)
{
    return bool_knob(&dkey_direct_on, on, "dkey_direct: on must be a bool");
}

/* A file's row in the store's form, (seq, slot) (sqlite_format.FoldedRows.cols: the
 * compiled reader put the entry in the store): the slot's fields load_inserts reads,
 * borrowed (ns, key, expires_at, value from its extras, else their defaults: the empty
 * tuple, None), or NULL, no exception, when `num` is not a live slot of `ec` or its
 * extras are not the store's tuple (the caller leaves the row to its Python path). */
typedef struct {
    const EcSlot *e;
    PyObject *ns, *key, *expires, *value, *cat;
} SlotRow;


static inline int
slot_row(EntryColumnsObject *ec, PyObject *num, SlotRow *out)
{
    if (!PyLong_CheckExact(num)) return 0;
    int overflow = 0;
    long long at = PyLong_AsLongLongAndOverflow(num, &overflow);
    if (overflow || at < 0 || at >= ec->next) {
        PyErr_Clear();
        return 0;
    }
    const EcSlot *e = ec_at(ec, at);
    if (!(e->flags & EC_LIVE) || e->cat >= PyTuple_GET_SIZE(ec->categories)) return 0;
    out->e = e;
    out->cat = PyTuple_GET_ITEM(ec->categories, e->cat);
    if (e->flags & EC_EXTRA) {
        PyObject *x = PyDict_GetItemWithError(ec->extras, num); /* borrowed */
        if (!x || !PyTuple_CheckExact(x) || PyTuple_GET_SIZE(x) != EC_EXTRAS) {
            PyErr_Clear();
            return 0;
        }
        out->ns = PyTuple_GET_ITEM(x, 2);
        out->key = PyTuple_GET_ITEM(x, 4);
        out->value = PyTuple_GET_ITEM(x, 5);
        out->expires = PyTuple_GET_ITEM(x, 8);
    } else {
        out->ns = ins_empty;
        out->key = out->value = out->expires = Py_None;
    }
    return out->ns != NULL;
}

/* Python's hash of the non-negative int hi * 2**64 + lo (x mod 2**61 - 1: int's own
 * hash, never -1), with no int made. */
static inline Py_hash_t
id_bits_hash(uint64_t hi, uint64_t lo)
{
    const uint64_t P = ((uint64_t)1 << 61) - 1;
    /* 2**64 = 8 (mod P) */
    unsigned __int128 x = (unsigned __int128)(hi % P) * 8 + (lo % P);
    return (Py_hash_t)(uint64_t)(x % P);
}

/* The look-ahead of load_inserts for row j: the id table's and the duplicate table's
 * slots of its id and duplicate key asked for from memory (both tables are larger than
 * the caches at 1M rows: each row's probes missed them), and the duplicate key kept for
 * when the loop reaches the row. Only for a row whose key takes no Python code and no
 * fold of the text (a category seen before, a fold from the reader); never fails (an
 * error is cleared: the loop computes the key itself then). */
static void
load_ahead(PyObject *rows, Py_ssize_t j, const uint64_t *fold_at, const IdTableObject *idt,
           const DupTableObject *table, PyObject *cat_seen, PyObject *cat_value,
           LoadAhead *pre, EntryColumnsObject *ec)
{
    LoadAhead *slot = &pre[j % LOAD_RING];
    slot->row = -1;
    PyObject *row = PyList_GET_ITEM(rows, j);
    if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) return;
    PyObject *entry = PyTuple_GET_ITEM(row, 1);
    PyObject *key, *text, *ns, *cat, *value;
    Py_hash_t hid;
    if (ec) { /* the store's form: (seq, slot) */
        SlotRow sr;
        if (!slot_row(ec, entry, &sr)) return;
        key = sr.key, ns = sr.ns, cat = sr.cat, value = sr.value;
        text = Py_None; /* (only its type is read below: a fold from the reader needed) */
        hid = id_bits_hash(sr.e->id_hi, sr.e->id_lo);
    } else {
        if (!Py_IS_TYPE(entry, ins_entry_type)) return;
        const Py_ssize_t *eo = ins_entry_off;
        PyObject *ident = SLOT(entry, eo[0]);
        key = SLOT(entry, eo[2]), text = SLOT(entry, eo[5]), ns = SLOT(entry, eo[6]),
        cat = SLOT(entry, eo[7]), value = SLOT(entry, eo[8]);
        if (!ident || !PyLong_CheckExact(ident)) return;
        hid = PyObject_Hash(ident); /* an exact int's: no code, no error */
        if (hid == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return;
        }
    }
    if (idt->cap) {
        Py_ssize_t home = oa_home(it_tag(hid), idt->cap);
        LOAD_PREFETCH(&idt->tags[home]);
        LOAD_PREFETCH(&idt->vals[home]);
    }
    slot->row = j;
    slot->entry = entry;
    slot->has_dkey = 0;
    if (!fold_at || fold_at[j] >= ((uint64_t)1 << 62) || !cat_seen || cat != cat_seen ||
        key != Py_None || value != Py_None || !text || !(ec || PyUnicode_CheckExact(text)) ||
        !ns || !PyTuple_CheckExact(ns)) {
        return;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(ns); k++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(ns, k))) return;
    }
    Py_hash_t h;
    if (dkey_direct_ok()) {
        h = dkey_direct(ns, cat_value, fold_at[j]);
    } else {
    PyObject *t = PyTuple_New(5);
    PyObject *folded = t ? PyLong_FromUnsignedLongLong(fold_at[j]) : NULL;
    if (!folded) {
        Py_XDECREF(t);
        PyErr_Clear();
        return;
    }
    PyTuple_SET_ITEM(t, 0, Py_NewRef(ns));
    PyTuple_SET_ITEM(t, 1, Py_NewRef(cat_value));
    PyTuple_SET_ITEM(t, 2, folded);
    PyTuple_SET_ITEM(t, 3, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(t, 4, Py_NewRef(Py_None));
    h = PyObject_Hash(t);
    Py_DECREF(t);
    }
    if (h == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return;
    }
    slot->dkey = (uint32_t)(h & 0x3FFFFFFF);
    slot->has_dkey = 1;
    if (table->cap) {
        Py_ssize_t home = oa_home(slot->dkey, table->cap);
        LOAD_PREFETCH(&table->keys[home]);
        LOAD_PREFETCH(&table->vals[home]);
    }
}

static PyObject *
load_inserts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13 && nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "load_inserts() takes 13 or 14 arguments");
        return NULL;
    }
    if (!ins_rec_type || !ins_ns_type || !ins_never || !ins_s_value_) {
        PyErr_SetString(PyExc_RuntimeError, "load_inserts: store_setup() not called");
        return NULL;
    }
    PyObject *rows = args[0], *folds = args[2], *by_id = args[4], *namespaces = args[5],
             *dups = args[6], *dup_keys = args[7], *records = args[8], *exact = args[9],
             *rel_parts = args[10], *keys = args[11], *cols = args[12];
    if (!Py_IS_TYPE(cols, &EntryColumns_Type)) {
        PyErr_SetString(PyExc_TypeError, "load_inserts: cols must be an EntryColumns");
        return NULL;
    }
    int rec_keys = nargs == 14 && args[13] == Py_True;
    if (nargs == 14 && !PyBool_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "load_inserts: rec_keys must be a bool");
        return NULL;
    }
    if (rec_keys && !ins_rec_i64) {
        PyErr_SetString(PyExc_TypeError, "load_inserts: rec_keys needs the compiled record");
        return NULL;
    }
    if (!PyList_Check(rows) || !PyLong_CheckExact(args[1]) ||
        !(folds == Py_None || PyBytes_CheckExact(folds)) || !PyLong_CheckExact(args[3]) ||
        !Py_IS_TYPE(by_id, &IdTable_Type) || !PyDict_CheckExact(namespaces) ||
        !Py_IS_TYPE(dups, &DupTable_Type) || !PySet_CheckExact(dup_keys) ||
        !PyList_CheckExact(records) || !(exact == Py_None || PyList_CheckExact(exact)) ||
        !PyDict_CheckExact(rel_parts) || !PyList_CheckExact(keys)) {
        PyErr_SetString(PyExc_TypeError, "load_inserts: wrong argument types");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "load_inserts: start < 0");
        return NULL;
    }
    int overflow = 0;
    long long last = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (last == -1 && PyErr_Occurred()) return NULL;
    if (overflow > 0) return PyLong_FromSsize_t(i); /* no seq can be above it here */
    if (overflow < 0) last = -1;                     /* every seq >= 0 is above it */
    const Py_ssize_t *eo = ins_entry_off, *ro = ins_rec_off;
    DupTableObject *table = (DupTableObject *)dups;
    IdTableObject *idt = (IdTableObject *)by_id;
    if (idt->rec_type != ins_rec_type || !idt->cols || idt->entry_off != ro[0] ||
        idt->id_off != ro[6] || idt->slot_i64 != ins_rec_i64) {
        PyErr_SetString(PyExc_TypeError, "load_inserts: by_id is an IdTable of other classes");
        return NULL;
    }
    PyObject *cat_seen = NULL, *cat_value = NULL; /* borrowed: the category's _value_ */
    PyObject *ns_seen = NULL, *ns_list = NULL;    /* borrowed: the last namespace's list */
    /* the rows' form: (seq, entry), or the store's (seq, slot) in cols (the reader
     * put them there: sqlite_format.FoldedRows.cols), told by the first row's */
    int slots = 0;
    if (i < PyList_GET_SIZE(rows)) {
        PyObject *r0 = PyList_GET_ITEM(rows, i);
        slots = PyTuple_CheckExact(r0) && PyTuple_GET_SIZE(r0) == 2 &&
                PyLong_CheckExact(PyTuple_GET_ITEM(r0, 1));
    }
    if (slots && (!ins_empty || !ins_one)) {
        PyErr_SetString(PyExc_RuntimeError, "load_inserts: store_setup() not called");
        return NULL;
    }
    PyObject *held_rel = NULL; /* a slot row's relevance (a float made for it) */
    LoadAhead pre[LOAD_RING];
    for (int k = 0; k < LOAD_RING; k++) pre[k].row = -1;
    for (;; i++) {
        Py_ssize_t n = PyList_GET_SIZE(rows);
        if (i >= n) break;
        /* the fold bytes belong to these rows only while one a row (re-read: a list) */
        const uint64_t *fold_at = NULL;
        if (folds != Py_None && PyBytes_GET_SIZE(folds) == 8 * n) {
            fold_at = (const uint64_t *)PyBytes_AS_STRING(folds);
        }
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (LOAD_AHEAD && i + LOAD_AHEAD < n) {
            load_ahead(rows, i + LOAD_AHEAD, fold_at, idt, table, cat_seen, cat_value, pre,
                       slots ? (EntryColumnsObject *)cols : NULL);
        }
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) break;
        PyObject *seq = PyTuple_GET_ITEM(row, 0), *entry = PyTuple_GET_ITEM(row, 1);
        if (!PyLong_CheckExact(seq) || !(slots ? PyLong_CheckExact(entry)
                                               : Py_IS_TYPE(entry, ins_entry_type)))
            break;
        long long s = PyLong_AsLongLongAndOverflow(seq, &overflow);
        if (s == -1 && PyErr_Occurred()) goto fail;
        if (overflow || s <= last) break; /* the caller's ValueError */
        PyObject *ident, *key, *expires, *rel, *text, *ns, *cat, *value;
        Py_CLEAR(held_rel);
        const EcSlot *row_slot = NULL; /* the store's form: the row's slot (its id's bits) */
        uint32_t id_tag = 0;
        if (slots) { /* the store's form: the fields read from the row's slot */
            SlotRow sr;
            if (!slot_row((EntryColumnsObject *)cols, entry, &sr)) break;
            key = sr.key, expires = sr.expires, ns = sr.ns, cat = sr.cat, value = sr.value;
            text = Py_None; /* made below only if no fold came with the row */
            row_slot = sr.e;
            /* the id looked up by its bits (no int made): its int's hash, as it_tag_of */
            id_tag = it_tag(id_bits_hash(sr.e->id_hi, sr.e->id_lo));
            ident = Py_None; /* (not read in this form) */
            if (sr.e->relevance == 1.0) rel = ins_one;
            else if (!(rel = held_rel = PyFloat_FromDouble(sr.e->relevance))) goto fail;
        } else {
            ident = SLOT(entry, eo[0]), key = SLOT(entry, eo[2]), expires = SLOT(entry, eo[3]),
            rel = SLOT(entry, eo[4]), text = SLOT(entry, eo[5]), ns = SLOT(entry, eo[6]),
            cat = SLOT(entry, eo[7]), value = SLOT(entry, eo[8]);
            if (text && !PyUnicode_CheckExact(text)) break;
        }
        if (!ident || !rel || !text || !ns || !cat || key != Py_None || expires != Py_None ||
            value != Py_None || !PyFloat_CheckExact(rel) ||
            !(row_slot || PyLong_CheckExact(ident)) || !PyTuple_CheckExact(ns)) {
            break;
        }
        if (ns != ns_seen) { /* its parts' hashes and equality: exact strs, no Python code */
            int plain = 1;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(ns) && plain; k++) {
                plain = PyUnicode_CheckExact(PyTuple_GET_ITEM(ns, k));
            }
            if (!plain) break;
        }
        if (row_slot) {
            if (it_find_bits(idt, row_slot->id_hi, row_slot->id_lo, id_tag) >= 0) break;
        } else {
            PyObject *old = it_lookup(idt, ident); /* borrowed */
            if (!old && PyErr_Occurred()) goto fail;
            if (old) break; /* the caller's ValueError */
        }
        PyObject *part = PyDict_GetItemWithError(rel_parts, rel); /* borrowed */
        if (!part) {
            if (PyErr_Occurred()) goto fail;
            break; /* the caller computes and caches it */
        }
        if (!PyLong_CheckExact(part) || _PyLong_Sign(part) < 0) break;
        if (ns != ns_seen) {
            PyObject *lst = PyDict_GetItemWithError(namespaces, ns); /* borrowed */
            if (!lst) {
                if (PyErr_Occurred()) goto fail;
                break; /* a new namespace: the caller's */
            }
            if (!Py_IS_TYPE(lst, ins_ns_type)) break;
            ns_seen = ns;
            ns_list = lst;
        }
        PyObject *recs = SLOT(ns_list, ins_ns_off[0]), *nlive = SLOT(ns_list, ins_ns_off[1]);
        if (!recs || !nlive || !PyList_CheckExact(recs) || !PyLong_CheckExact(nlive)) break;
        if (cat != cat_seen) {
            PyObject *cv = PyObject_GetAttr(cat, ins_s_value_);
            if (!cv) goto fail;
            int ok = PyUnicode_CheckExact(cv);
            Py_DECREF(cv); /* the enum member keeps its value */
            if (!ok) break;
            cat_seen = cat;
            cat_value = cv;
        }
        /* The fallible steps, before any change for this row. */
        uint32_t dkey32;
        LoadAhead *mine = &pre[i % LOAD_RING];
        if (LOAD_AHEAD && mine->row == i && mine->has_dkey && mine->entry == entry) {
            dkey32 = mine->dkey; /* the same objects' hash, taken ahead */
        } else if (fold_at && fold_at[i] < ((uint64_t)1 << 62) && dkey_direct_ok()) {
            Py_hash_t h = dkey_direct(ns, cat_value, fold_at[i]);
            if (h == -1 && PyErr_Occurred()) goto fail;
            dkey32 = (uint32_t)(h & 0x3FFFFFFF);
        } else {
        PyObject *folded;
        if (fold_at && fold_at[i] < ((uint64_t)1 << 62)) {
            folded = PyLong_FromUnsignedLongLong(fold_at[i]);
        } else if (slots) { /* the text made from the store for its fold */
            SlotRow sr;
            PyObject *t = slot_row((EntryColumnsObject *)cols, entry, &sr)
                              ? ec_text_obj((EntryColumnsObject *)cols, sr.e) : NULL;
            if (!t) {
                if (PyErr_Occurred()) goto fail;
                break;
            }
            folded = fold_hash_impl(t, 2);
            Py_DECREF(t);
        } else {
            folded = fold_hash_impl(text, 2);
        }
        if (!folded) goto fail;
        PyObject *t = PyTuple_New(5);
        if (!t) {
            Py_DECREF(folded);
            goto fail;
        }
        PyTuple_SET_ITEM(t, 0, Py_NewRef(ns));
        PyTuple_SET_ITEM(t, 1, Py_NewRef(cat_value));
        PyTuple_SET_ITEM(t, 2, folded);
        PyTuple_SET_ITEM(t, 3, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(t, 4, Py_NewRef(Py_None));
        Py_hash_t h = PyObject_Hash(t); /* strs, ints and None: no Python code */
        Py_DECREF(t);
        if (h == -1 && PyErr_Occurred()) goto fail;
        dkey32 = (uint32_t)(h & 0x3FFFFFFF);
        }
        if (dt_reserve(table, 1) < 0 || it_reserve(idt, 1) < 0) goto fail;
        PyObject *rkey = _PyLong_Sign(part) == 0 ? Py_NewRef(seq) : PyNumber_Or(part, seq);
        if (!rkey) goto fail;
        Py_ssize_t nl0 = PyLong_AsSsize_t(nlive);
        if (nl0 == -1 && PyErr_Occurred()) {
            Py_DECREF(rkey);
            goto fail;
        }
        PyObject *live1 = PyLong_FromSsize_t(nl0 + 1);
        PyObject *rec = ins_rec_type->tp_alloc(ins_rec_type, 0);
        /* the entry into the store last: nothing fails after it (the store's form:
         * the row's slot, already there) */
        PyObject *num = !(live1 && rec) ? NULL
                        : slots         ? Py_NewRef(entry)
                                        : ec_put((EntryColumnsObject *)cols, entry);
        if (!num) {
            int refused = live1 && rec && ins_refused(); /* as store_inserts' */
            Py_DECREF(rkey);
            Py_XDECREF(live1);
            Py_XDECREF(rec);
            if (refused) break;
            goto fail;
        }
        ins_fill_record(rec, cols, num, seq);
        Py_DECREF(num);
        if (rec_keys && rkey == seq) Py_SETREF(rkey, Py_NewRef(rec)); /* its own key */
        /* The changes: only an allocation failing inside a container can stop them
         * midway (as it could in the Python loop). */
        int err = 0;
        if (row_slot) { /* absent (looked up above), room made by it_reserve */
            it_place(idt->tags, idt->vals, idt->cap, id_tag, Py_NewRef(rec));
            idt->used++;
            idt->changes++;
        } else {
            err = it_put(idt, ident, rec);
        }
        if (!err) err = list_append_wide(records, rec);
        if (!err && exact != Py_None && !slots) err = list_append_wide(exact, entry);
        if (!err) err = list_append_wide(recs, rec);
        if (!err) Py_SETREF(SLOT(ns_list, ins_ns_off[1]), Py_NewRef(live1));
        if (!err) err = list_append_wide(keys, rkey);
        if (!err) {
            int pair = dt_join(table, dkey32, rec); /* dt_reserve made room */
            err = pair < 0 ? -1 : 0;
            if (pair == 1) {
                PyObject *dkey = PyLong_FromUnsignedLong(dkey32);
                err = dkey ? PySet_Add(dup_keys, dkey) : -1;
                Py_XDECREF(dkey);
            }
        }
        Py_DECREF(rkey);
        Py_DECREF(live1);
        Py_DECREF(rec);
        if (err) goto fail;
        last = s;
    }
    Py_XDECREF(held_rel);
    return PyLong_FromSsize_t(i);
fail:
    Py_XDECREF(held_rel);
    return NULL;
}


PyDoc_STRVAR(add_groups_new_doc,
"add_groups_new(recs, start, groups, glist, recent, scan, first, lows, rels, seqs,\n"
"               lower) -> int\n\n"
"The word-overlap index's add_many loop (wordoverlap/index.py) for recs[start],\n"
"recs[start + 1], ... (a list) while each is a record of store_setup's class whose\n"
"entry has no tags and an exact str text that groups does not have: groups[text] =\n"
"first + len(lows) (its group number g), glist.append(rec), low = lower(text) (an\n"
"exact str, else TypeError), recent[g % scan] = low (g % scan within recent, else\n"
"left to the caller), lows, rels and seqs appended low, the relevance and rec.seq.\n"
"groups: a dict, or a GroupTable over glist (its append: the text mapped to the number\n"
"glist.append gives it, so g must be len(glist), else the record is left to the caller).\n"
"Returns the index of the first record not added (len(recs) when all were). A\n"
"record's fallible steps (lower, the group number) come before any change for it; a\n"
"lower that changes recs[i], its record, the lists or the map leaves it to the caller.\n"
"TypeError for wrong argument types, RuntimeError before record_setup or store_setup.\n"
"O(sum of the texts' lengths).");

static PyObject *
add_groups_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "add_groups_new() takes 11 arguments");
        return NULL;
    }
    if (!ins_rec_type) {
        PyErr_SetString(PyExc_RuntimeError, "add_groups_new: record_setup() not called");
        return NULL;
    }
    PyObject *recs = args[0], *groups = args[2], *glist = args[3], *recent = args[4],
             *lows = args[7], *rels = args[8], *seqs = args[9], *lower = args[10];
    GroupTableObject *gt =
        Py_IS_TYPE(groups, &GroupTable_Type) ? (GroupTableObject *)groups : NULL;
    if (!PyList_CheckExact(recs) || !PyLong_CheckExact(args[1]) ||
        !(PyDict_CheckExact(groups) || (gt && gt->glist == glist)) ||
        !PyList_CheckExact(glist) || !PyList_CheckExact(recent) || !PyLong_CheckExact(args[5]) ||
        !PyLong_CheckExact(args[6]) || !PyList_CheckExact(lows) || !PyList_CheckExact(rels) ||
        !PyList_CheckExact(seqs) || !PyCallable_Check(lower)) {
        PyErr_SetString(PyExc_TypeError, "add_groups_new: wrong argument types");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t scan = PyLong_AsSsize_t(args[5]);
    if (scan == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t first = PyLong_AsSsize_t(args[6]);
    if (first == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || scan < 1 || first < 0) {
        PyErr_SetString(PyExc_ValueError, "add_groups_new: start < 0, scan < 1 or first < 0");
        return NULL;
    }
    for (;; i++) {
        if (i >= PyList_GET_SIZE(recs)) break;
        PyObject *rec = PyList_GET_ITEM(recs, i);
        if (!Py_IS_TYPE(rec, ins_rec_type)) break;
        /* the entry's fields from the record's slot of its store */
        EntryColumnsObject *ec = NULL;
        EcSlot *es = ins_rec_slot(rec, &ec);
        if (!es) break;
        /* seq and slot: the record's int objects, or the compiled Record's int64 fields
         * (ints made for the call's hold and the seqs list below) */
        int64_t seq_v = 0, num_v = 0;
        PyObject *seq = NULL, *num = NULL;
        if (ins_rec_i64) {
            seq_v = FIELD_I64(rec, ins_rec_off[3]);
            num_v = FIELD_I64(rec, ins_rec_off[6]);
        } else {
            seq = SLOT(rec, ins_rec_off[3]), num = SLOT(rec, ins_rec_off[6]);
            if (!seq) break;
        }
        if (es->flags & EC_EXTRA) {
            PyObject *key = ins_rec_i64 ? PyLong_FromLongLong(num_v) : Py_NewRef(num);
            if (!key) return NULL;
            PyObject *tags = ins_slot_tags(ec, es, key); /* borrowed from the extras */
            Py_DECREF(key);
            if (!tags) return NULL;
            if (!PyTuple_CheckExact(tags) || PyTuple_GET_SIZE(tags) != 0) {
                break; /* tags: the tag postings' */
            }
        }
        PyObject *text = ec_text_obj(ec, es), *rel = text ? PyFloat_FromDouble(es->relevance) : NULL;
        if (!rel) {
            Py_XDECREF(text);
            return NULL;
        }
#define AGN_DROP() do { Py_DECREF(text); Py_DECREF(rel); } while (0)
        uint32_t tag = 0;
        uint64_t seen = 0;
        if (gt) { /* knobs._GROUP_TABLE: no int object, the text not kept */
            Py_ssize_t at = gt_find_str(gt, text, &tag);
            if (at < 0 && at != -1) {
                AGN_DROP();
                return NULL;
            }
            if (at >= 0) {
                AGN_DROP();
                break; /* a text seen before: its group's */
            }
            seen = gt->changes;
        } else {
            int has = PyDict_Contains(groups, text);
            if (has) {
                AGN_DROP();
                if (has < 0) return NULL;
                break; /* a text seen before: its group's */
            }
        }
        Py_ssize_t g = first + PyList_GET_SIZE(lows);
        if (g % scan >= PyList_GET_SIZE(recent) || (gt && g != PyList_GET_SIZE(glist))) {
            AGN_DROP(); /* (the table numbers by glist) */
            break;
        }
#undef AGN_DROP
        /* lower may run code (a Python callable) that drops recs[i], rebinds its slots,
         * releases its slot or maps the text: the record and what was read from it are
         * held across the call, and any such change leaves the record to the caller's
         * loop. (text and rel are this loop's own references.) */
        if (ins_rec_i64) {
            seq = PyLong_FromLongLong(seq_v);
            num = seq ? PyLong_FromLongLong(num_v) : NULL;
            if (!num) {
                Py_XDECREF(seq);
                Py_DECREF(text);
                Py_DECREF(rel);
                return NULL;
            }
        } else {
            Py_INCREF(seq);
            Py_INCREF(num);
        }
        PyObject *held[6] = {rec, (PyObject *)ec, text, rel, seq, num};
        Py_INCREF(rec);
        Py_INCREF(ec);
        PyObject *low = PyObject_CallOneArg(lower, text);
        int moved = low && (i >= PyList_GET_SIZE(recs) || PyList_GET_ITEM(recs, i) != rec ||
                            SLOT(rec, ins_rec_off[0]) != (PyObject *)ec ||
                            (ins_rec_i64 ? FIELD_I64(rec, ins_rec_off[3]) != seq_v ||
                                               FIELD_I64(rec, ins_rec_off[6]) != num_v
                                         : SLOT(rec, ins_rec_off[3]) != seq ||
                                               SLOT(rec, ins_rec_off[6]) != num) ||
                            !(es->flags & EC_LIVE) || g != first + PyList_GET_SIZE(lows) ||
                            g % scan >= PyList_GET_SIZE(recent));
        if (low && !moved && !gt) {
            int has = PyDict_Contains(groups, text); /* mapped by that code? */
            if (has < 0) Py_CLEAR(low);
            else moved = has;
        }
        /* From here on, `held` is released on every path (a release of a replaced
         * `recent` item may run code too). */
#define AGN_RELEASE() do { for (int h = 0; h < 6; h++) Py_DECREF(held[h]); } while (0)
        if (!low) {
            AGN_RELEASE();
            return NULL;
        }
        if (!PyUnicode_CheckExact(low)) {
            Py_DECREF(low);
            AGN_RELEASE();
            PyErr_SetString(PyExc_TypeError, "add_groups_new: lower() must return a str");
            return NULL;
        }
        if (moved || (gt && (gt->changes != seen || g != PyList_GET_SIZE(glist)))) {
            /* lower ran code that changed the record, the lists or the map: the
             * caller's loop takes this record (nothing done for it here). */
            Py_DECREF(low);
            AGN_RELEASE();
            break;
        }
        int err;
        if (gt) {
            err = gt_append_item(gt, rec, tag); /* glist.append(rec), text -> g */
        } else {
            PyObject *gid = PyLong_FromSsize_t(g);
            if (!gid) {
                Py_DECREF(low);
                AGN_RELEASE();
                return NULL;
            }
            err = PyDict_SetItem(groups, text, gid);
            Py_DECREF(gid);
            if (!err) err = PyList_Append(glist, rec);
        }
        if (!err) err = PyList_SetItem(recent, g % scan, Py_NewRef(low));
        if (!err) err = PyList_Append(lows, low);
        if (!err) err = PyList_Append(rels, rel);
        if (!err) err = PyList_Append(seqs, seq);
        Py_DECREF(low);
        AGN_RELEASE();
#undef AGN_RELEASE
        if (err) return NULL;
    }
    return PyLong_FromSsize_t(i);
}


PyDoc_STRVAR(set_grow_direct_doc,
"set_grow_direct(on) -> bool\n\n"
"Whether a posting append to a full array('i') grows it here (array_resize's capacity\n"
"and allocator, no array.append call: knobs._GROW_DIRECT) or by array.append, the path\n"
"before it; returns the previous setting. The same arrays and capacities. O(1).");

static PyObject *
set_grow_direct(PyObject *self, PyObject *on)
{
    int flag = PyObject_IsTrue(on);
    if (flag < 0) return NULL;
    int was = grow_direct;
    grow_direct = flag;
    return PyBool_FromLong(was);
}

/* ------------------------------------------------------------------ query words (mainjob18)
 *
 *   query_words  a retrieve's query lowered, split and counted in one pass over its
 *               bytes (an ASCII query): the same values as query.lower(), its split()
 *               and collections' _count_elements, without the split list or a str per
 *               repeated word.
 */

PyDoc_STRVAR(query_words_doc,
"query_words(query, intern=0) -> (str, dict, int) | None\n\n"
"For an ASCII str (below 2**31 characters): (query.lower(), {word: times} in first-seen order over\n"
"query.lower().split(), the number of words); None for a non-ASCII one.\n"
"With `intern` true, a word of at most 24 characters is the str a previous\n"
"call made for the same word when the process-wide table of 8,192 slots (one str\n"
"per slot, by the word's hash) still holds it, else a new str kept there: equal\n"
"words of successive queries are then one object, its hash computed once, so the\n"
"dicts keyed by query words (the result's, count_words' memo) find it by identity.\n"
"The same values either way. TypeError for anything but a str, or a second\n"
"argument that is not an int. O(len(query)) time and memory; the table holds at\n"
"most 8,192 strs of at most 24 characters (~0.6 MB).");

/* The process-wide word table of query_words(query, intern=1): direct-mapped by the
 * word's FNV-1a hash (its high bits; the per-call table uses the low ones), one str
 * (owned) per slot, replaced by the next word that maps there. Strs are immutable and
 * compared by value everywhere, so handing the same object to several queries changes
 * no value. Read and written with the GIL held and no Python code run in between. */
#define QW_SLOTS 8192
#define QW_MAXLEN 24
static struct {
    uint64_t h;
    PyObject *s;
} qw_tab[QW_SLOTS];

/* The str for the ASCII word w[0:len] of FNV-1a hash h: the table's when it holds the
 * same word, else a new one (kept in the table when `keep` and short enough). A new
 * reference, or NULL with an error set. */
static PyObject *
qw_str(const Py_UCS1 *w, Py_ssize_t len, uint64_t h, int keep)
{
    size_t slot = (size_t)(h >> 51) & (QW_SLOTS - 1);
    keep = keep && len <= QW_MAXLEN;
    if (keep) {
        PyObject *s = qw_tab[slot].s;
        if (s && qw_tab[slot].h == h && PyUnicode_GET_LENGTH(s) == len &&
            memcmp(PyUnicode_1BYTE_DATA(s), w, (size_t)len) == 0) {
            return Py_NewRef(s);
        }
    }
    PyObject *o = PyUnicode_New(len, 127);
    if (!o) return NULL;
    memcpy(PyUnicode_1BYTE_DATA(o), w, (size_t)len);
    if (keep) {
        PyObject *was = qw_tab[slot].s;
        qw_tab[slot].s = Py_NewRef(o);
        qw_tab[slot].h = h;
        Py_XDECREF(was); /* a str: its dealloc runs no Python code */
    }
    return o;
}

static PyObject *
query_words(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "query_words() takes a str and an optional int");
        return NULL;
    }
    PyObject *query = args[0];
    if (!PyUnicode_CheckExact(query)) {
        PyErr_SetString(PyExc_TypeError, "query_words() takes a str");
        return NULL;
    }
    int intern = 0;
    if (nargs == 2) {
        if (!PyLong_CheckExact(args[1])) {
            PyErr_SetString(PyExc_TypeError, "query_words(): intern must be an int");
            return NULL;
        }
        intern = PyObject_IsTrue(args[1]);
        if (intern < 0) return NULL;
    }
    /* (Longer than 2**31 characters: the table's int32 indexes; left to Python too.) */
    if (!PyUnicode_IS_ASCII(query) || PyUnicode_GET_LENGTH(query) > INT32_MAX) Py_RETURN_NONE;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(query);
    Py_ssize_t n = PyUnicode_GET_LENGTH(query);
    PyObject *low = PyUnicode_New(n, 127);
    if (!low) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(low);
    /* One pass: lowered into `low`, each word's start and end noted (at most
     * n / 2 + 1 words). */
    size_t most = (size_t)n / 2 + 1;
    Py_ssize_t *spans = PyMem_Malloc(2 * most * sizeof *spans);
    if (!spans) {
        Py_DECREF(low);
        return PyErr_NoMemory();
    }
    Py_ssize_t total = 0;
    int in_word = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS1 c = s[i];
        int sp = ascii_space_tab[c];
        d[i] = c >= 'A' && c <= 'Z' ? (Py_UCS1)(c + ('a' - 'A')) : c;
        if (sp == in_word) {
            spans[2 * total + (in_word ? 1 : 0)] = i;
            if (in_word) total++;
            in_word = !in_word;
        }
    }
    if (in_word) spans[2 * total++ + 1] = n;
    /* The distinct words by their bytes: an open-addressing table of indexes into
     * `first` (at most half full). */
    size_t cap = 16;
    while (cap < 2 * (size_t)total) cap <<= 1;
    int32_t *tab = PyMem_Malloc(cap * sizeof *tab);
    struct { uint64_t h; Py_ssize_t start, len, times; } *first =
        PyMem_Malloc(((size_t)total + 1) * sizeof *first);
    PyObject *words = PyList_New(0), *mult = NULL, *result = NULL;
    if (!tab || !first) {
        PyErr_NoMemory();
        goto done;
    }
    if (!words) goto done;
    memset(tab, 0xFF, cap * sizeof *tab);
    Py_ssize_t distinct = 0;
    for (Py_ssize_t w = 0; w < total; w++) {
        Py_ssize_t start = spans[2 * w], len = spans[2 * w + 1] - start;
        uint64_t h = 0xcbf29ce484222325ull;
        for (Py_ssize_t i = start; i < start + len; i++) h = (h ^ d[i]) * 0x100000001b3ull;
        size_t k = (size_t)(h ^ (h >> 29)) & (cap - 1);
        for (;;) {
            int32_t at = tab[k];
            if (at < 0) {
                PyObject *o = qw_str(d + start, len, h, intern);
                if (!o) goto done;
                int bad = PyList_Append(words, o);
                Py_DECREF(o);
                if (bad) goto done;
                first[distinct].h = h;
                first[distinct].start = start;
                first[distinct].len = len;
                first[distinct].times = 1;
                tab[k] = (int32_t)distinct++;
                break;
            }
            if (first[at].h == h && first[at].len == len &&
                memcmp(d + first[at].start, d + start, (size_t)len) == 0) {
                first[at].times++;
                break;
            }
            k = (k + 1) & (cap - 1);
        }
    }
    /* Sized for its `distinct` words at once: a query of a tool call's text has
     * ~35, which a dict grown from empty rehashed three times (hot45). The same
     * items in the same order. */
    mult = _PyDict_NewPresized(distinct);
    if (!mult) goto done;
    for (Py_ssize_t j = 0; j < distinct; j++) {
        PyObject *m = PyLong_FromSsize_t(first[j].times);
        if (!m) goto done;
        int bad = PyDict_SetItem(mult, PyList_GET_ITEM(words, j), m);
        Py_DECREF(m);
        if (bad) goto done;
    }
    result = Py_BuildValue("(OOn)", low, mult, total);
done:
    PyMem_Free(spans);
    PyMem_Free(tab);
    PyMem_Free(first);
    Py_XDECREF(words);
    Py_XDECREF(mult);
    Py_DECREF(low);
    return result;
}

/* ------------------------------------------------------------------ restore columns */

PyDoc_STRVAR(restore_columns_doc,
"restore_columns(records, expect=None) -> (texts, relevance, seqs, tagged[, same]) or None\n\n"
"What the word-overlap restore reads of each record, in one pass without the\n"
"interpreter: texts the list of every record's entry.memory, relevance the bytes of a\n"
"float64 array of entry.relevance, seqs those of an int64 array of seq, tagged the list\n"
"of the positions whose entry.tags is not empty: each read from the record's live slot\n"
"of its EntryColumns store. None (nothing made) when a record is not plain: not exactly\n"
"store_setup's record class, its store not an EntryColumns, its slot not a live slot's\n"
"int, a seq not an exact int in int64, tags not an exact tuple. TypeError when records\n"
"is not a list, RuntimeError before record_setup or store_setup, or when a finalizer\n"
"run by a collection during its allocations changed the list. With expect (a tuple), a\n"
"fifth item: True when expect has as many items as records and each is an exact str\n"
"equal to the record's text (its UTF-8 against the stored bytes, in the same pass;\n"
"texts then holds expect's very objects), else False; TypeError when expect is\n"
"neither None, a tuple nor bytes. With expect the bytes of an int64 array of slot\n"
"numbers and cols an EntryColumns (the rows' store and slots; branch open42): no text is\n"
"made (texts is None) and the fifth item is True when each record's entry is the slot\n"
"of that number in cols, else False; TypeError unless cols is an EntryColumns then,\n"
"ValueError when expect's length is not a multiple of 8. O(sum of the texts' lengths)\n"
"(O(len(records)) without texts).");

static PyObject *
restore_columns(PyObject *self, PyObject *args)
{
    PyObject *records, *expect = Py_None, *colsobj = NULL;
    if (!PyArg_ParseTuple(args, "O|OO:restore_columns", &records, &expect, &colsobj))
        return NULL;
    int by_slot = PyBytes_CheckExact(expect);
    if (expect != Py_None && !PyTuple_CheckExact(expect) && !by_slot) {
        PyErr_SetString(PyExc_TypeError,
                        "restore_columns: expect must be a tuple, bytes or None");
        return NULL;
    }
    if (by_slot ? !colsobj || !Py_IS_TYPE(colsobj, &EntryColumns_Type) : colsobj != NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "restore_columns: cols (an EntryColumns) goes with expect's slots");
        return NULL;
    }
    if (by_slot && PyBytes_GET_SIZE(expect) % 8) {
        PyErr_SetString(PyExc_ValueError,
                        "restore_columns: expect's length is not a multiple of 8");
        return NULL;
    }
    EntryColumnsObject *want_ec = by_slot ? (EntryColumnsObject *)colsobj : NULL;
    if (!PyList_CheckExact(records)) {
        PyErr_SetString(PyExc_TypeError, "restore_columns: records must be a list");
        return NULL;
    }
    if (!ins_rec_type || !ins_entry_type) {
        PyErr_SetString(PyExc_RuntimeError, "restore_columns: record_setup() not called");
        return NULL;
    }
    /* nothing below runs Python code: the list cannot change during the pass */
    Py_ssize_t n = PyList_GET_SIZE(records);
    PyObject *texts = by_slot ? Py_NewRef(Py_None) : PyList_New(n);
    PyObject *rel = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
    PyObject *seqs = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    PyObject *tagged = PyList_New(0);
    if (!texts || !rel || !seqs || !tagged) goto error;
    if (PyList_GET_SIZE(records) != n) { /* a collection's finalizer changed it meanwhile */
        PyErr_SetString(PyExc_RuntimeError, "restore_columns: the list changed");
        goto error;
    }
    double *rel_of = (double *)PyBytes_AS_STRING(rel);
    int64_t *seq_of = (int64_t *)PyBytes_AS_STRING(seqs);
    /* the tuple holds its items: none can change or go while this runs */
    int check = expect != Py_None;
    int same = check && (by_slot ? PyBytes_GET_SIZE(expect) / 8 : PyTuple_GET_SIZE(expect)) == n;
    const int64_t *want_slot = by_slot ? (const int64_t *)PyBytes_AS_STRING(expect) : NULL;
    Py_ssize_t off_seq = ins_rec_off[3], off_num = ins_rec_off[6];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + 8 < n) __builtin_prefetch(PyList_GET_ITEM(records, i + 8));
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (Py_TYPE(rec) != ins_rec_type) goto plain_not;
        EntryColumnsObject *ec = NULL;
        EcSlot *es = ins_rec_slot(rec, &ec); /* the entry's slot in its store */
        if (!es) goto plain_not;
        long long s = 0;
        PyObject *seq = NULL;
        if (ins_rec_i64) {
            s = FIELD_I64(rec, off_seq);
        } else {
            seq = SLOT(rec, off_seq);
            if (!seq || !PyLong_CheckExact(seq)) goto plain_not;
        }
        PyObject *tags = NULL; /* NULL: the empty tuple (a slot without extras) */
        if (es->flags & EC_EXTRA) {
            PyObject *key = ins_rec_i64 ? PyLong_FromLongLong(FIELD_I64(rec, off_num))
                                        : Py_NewRef(SLOT(rec, off_num));
            if (!key) goto error;
            tags = ins_slot_tags(ec, es, key); /* borrowed from the extras */
            Py_DECREF(key);
            if (!tags) goto error;
            if (!PyTuple_CheckExact(tags)) goto plain_not;
        }
        if (!ins_rec_i64) {
            int overflow = 0;
            s = PyLong_AsLongLongAndOverflow(seq, &overflow);
            if (overflow || (s == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto plain_not;
            }
        }
        seq_of[i] = (int64_t)s;
        rel_of[i] = es->relevance;
        /* the text: the expected str itself when it is that text (the early digest's
         * objects, read from the rows: no second str), else a str made from the store */
        if (by_slot) { /* the row's very slot: no str made */
            same = same && ec == want_ec && want_slot[i] >= 0 && want_slot[i] < ec->next &&
                   ec_at(ec, want_slot[i]) == es;
            goto tagged;
        }
        PyObject *mem = NULL;
        if (same) {
            PyObject *want = PyTuple_GET_ITEM(expect, i);
            int eq = PyUnicode_CheckExact(want) ? ins_slot_text_is(ec, es, want) : 0;
            if (eq < 0) goto error;
            if (eq) mem = Py_NewRef(want);
            else same = 0;
        }
        if (!mem && !(mem = ec_text_obj(ec, es))) goto error;
        PyList_SET_ITEM(texts, i, mem);
    tagged:
        if (tags && PyTuple_GET_SIZE(tags) > 0) {
            PyObject *at = PyLong_FromSsize_t(i);
            if (!at) goto error;
            int rc = PyList_Append(tagged, at);
            Py_DECREF(at);
            if (rc < 0) goto error;
        }
    }
    PyObject *out = check ? PyTuple_Pack(5, texts, rel, seqs, tagged, same ? Py_True : Py_False)
                          : PyTuple_Pack(4, texts, rel, seqs, tagged);
    Py_DECREF(texts);
    Py_DECREF(rel);
    Py_DECREF(seqs);
    Py_DECREF(tagged);
    return out;
plain_not:
    Py_DECREF(texts); /* items not yet set are NULL: list_dealloc skips them */
    Py_DECREF(rel);
    Py_DECREF(seqs);
    Py_DECREF(tagged);
    Py_RETURN_NONE;
error:
    Py_XDECREF(texts);
    Py_XDECREF(rel);
    Py_XDECREF(seqs);
    Py_XDECREF(tagged);
    return NULL;
}

PyDoc_STRVAR(rows_slots_doc,
"rows_slots(rows, cols) -> bytes or None\n\n"
"The slot numbers of a file's rows in the store's form ((seq, slot) in cols, an\n"
"EntryColumns), in order, as the bytes of an int64 array (slots_groups' and\n"
"slots_encode's; branch open42). None (nothing made) when a row is not an exact tuple of\n"
"two or its slot not the int of a live slot of cols. TypeError unless rows is a list (a\n"
"subclass too: its items are read) and cols an EntryColumns. Runs no Python code.\n"
"O(len(rows)).");

static PyObject *
rows_slots(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !Py_IS_TYPE(args[1], &EntryColumns_Type)) {
        PyErr_SetString(PyExc_TypeError, "rows_slots(rows: list, cols: EntryColumns)");
        return NULL;
    }
    PyObject *rows = args[0];
    EntryColumnsObject *ec = (EntryColumnsObject *)args[1];
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (!out) return NULL;
    if (PyList_GET_SIZE(rows) != n) { /* a collection's finalizer changed it meanwhile */
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "rows_slots: the list changed");
        return NULL;
    }
    int64_t *sl = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) goto not_plain;
        PyObject *num = PyTuple_GET_ITEM(row, 1);
        if (!PyLong_CheckExact(num)) goto not_plain;
        int overflow = 0;
        long long s = PyLong_AsLongLongAndOverflow(num, &overflow);
        if (overflow || (s == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            goto not_plain;
        }
        if (s < 0 || s >= ec->next || !(ec_at(ec, s)->flags & EC_LIVE)) goto not_plain;
        sl[i] = (int64_t)s;
    }
    return out;
not_plain:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(rows_texts_doc,
"rows_texts(rows, cols=None) -> tuple or None\n\n"
"The text (entry.memory) of each of a file's (seq, entry) rows, in order, as a tuple:\n"
"what restore_columns' texts will be once the bulk load made a record of each row, read\n"
"ahead of it. None (nothing made) when a row is not an exact tuple of two, its entry not\n"
"exactly store_setup's entry class, the slot unset or the text not an exact str.\n"
"TypeError unless rows is a list (a subclass too: its items are read), RuntimeError\n"
"before record_setup. With cols (an EntryColumns), the rows are (seq, slot) in it and\n"
"each text is made from its slot's UTF-8 (None for a slot not live), with hashes (the\n"
"reader's FoldedRows.hashes: 8 bytes a row, -1 none) its hash set from them when ASCII.\n"
"Runs no Python\n"
"code. O(len(rows)) (and the texts' length with cols).");

static PyObject *
rows_texts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3 ||
        (nargs >= 2 && args[1] != Py_None && !Py_IS_TYPE(args[1], &EntryColumns_Type)) ||
        (nargs == 3 && !PyBytes_CheckExact(args[2]))) {
        PyErr_SetString(PyExc_TypeError,
                        "rows_texts(rows, cols=None, hashes=b''): cols an EntryColumns");
        return NULL;
    }
    PyObject *rows = args[0];
    EntryColumnsObject *ec = nargs >= 2 && args[1] != Py_None ? (EntryColumnsObject *)args[1]
                                                              : NULL;
    PyObject *hashes = nargs == 3 ? args[2] : NULL; /* the reader's, one a row, or b"" */
    if (!PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "rows_texts: rows must be a list");
        return NULL;
    }
    if (!ins_entry_type) {
        PyErr_SetString(PyExc_RuntimeError, "rows_texts: record_setup() not called");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows);
    PyObject *texts = PyTuple_New(n);
    if (!texts) return NULL;
    /* PyTuple_New may collect; a finalizer could have changed the list meanwhile */
    if (PyList_GET_SIZE(rows) != n) {
        Py_DECREF(texts);
        PyErr_SetString(PyExc_RuntimeError, "rows_texts: the list changed");
        return NULL;
    }
    Py_ssize_t off_mem = ins_entry_off[5];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + 8 < n) {
            PyObject *ahead = PyList_GET_ITEM(rows, i + 8);
            if (PyTuple_CheckExact(ahead) && PyTuple_GET_SIZE(ahead) == 2)
                __builtin_prefetch(PyTuple_GET_ITEM(ahead, 1));
        }
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) goto plain_not;
        PyObject *entry = PyTuple_GET_ITEM(row, 1);
        if (ec) { /* the store's form: the text made from the slot's UTF-8 */
            SlotRow sr;
            if (!ins_empty || !slot_row(ec, entry, &sr)) goto plain_not;
            PyObject *t = ec_text_obj(ec, sr.e);
            if (!t) {
                Py_DECREF(texts);
                return NULL;
            }
#if PY_VERSION_HEX < 0x030F0000 /* PyASCIIObject's cached hash, as the reader's entries */
            if (hashes && PyBytes_GET_SIZE(hashes) == 8 * n && (sr.e->flags & EC_ASCII) &&
                PyUnicode_IS_ASCII(t)) {
                int64_t h;
                memcpy(&h, PyBytes_AS_STRING(hashes) + 8 * i, 8);
                if (h != -1) ((PyASCIIObject *)t)->hash = (Py_hash_t)h;
            }
#endif
            PyTuple_SET_ITEM(texts, i, t);
            if (PyList_GET_SIZE(rows) != n) { /* (a str's allocation may collect) */
                Py_DECREF(texts);
                PyErr_SetString(PyExc_RuntimeError, "rows_texts: the list changed");
                return NULL;
            }
            continue;
        }
        if (Py_TYPE(entry) != ins_entry_type) goto plain_not;
        PyObject *mem = SLOT(entry, off_mem);
        if (!mem || !PyUnicode_CheckExact(mem)) goto plain_not;
        PyTuple_SET_ITEM(texts, i, Py_NewRef(mem));
    }
    return texts;
plain_not:
    Py_DECREF(texts); /* items not yet set are NULL: tuple_dealloc skips them */
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ texts' digest
 *
 * persist.text_digest's bytes made in C with the GIL released and hashed by hashlib
 * (which releases the GIL over a large buffer): texts_encode writes the next run of a
 * part's bytes into a caller's buffer, texts_first finds the distinct texts' first
 * appearances. No hash function of our own. */

/* How many texts ahead the encoder prefetches a str's header and first bytes. */
#define TD_AHEAD 8

/* Whether t is a str whose fields the encoder may read without the GIL: an exact str,
 * ready and compact (a str never changes those, nor its length, kind or data). */
static inline int
td_plain(PyObject *t)
{
    return Py_TYPE(t) == &PyUnicode_Type && PyUnicode_IS_READY(t) && PyUnicode_IS_COMPACT(t);
}

/* Code point c's UTF-8 ("surrogatepass": a surrogate as its three bytes) written at
 * out[w], w advanced; the caller made room (up to 4 bytes). */
#define TD_PUT_UTF8(out, w, c)                                                              \
    do {                                                                                    \
        Py_UCS4 c_ = (c);                                                                   \
        if (c_ < 0x80) {                                                                    \
            (out)[(w)++] = (uint8_t)c_;                                                     \
        } else if (c_ < 0x800) {                                                            \
            (out)[(w)++] = (uint8_t)(0xC0 | (c_ >> 6));                                     \
            (out)[(w)++] = (uint8_t)(0x80 | (c_ & 0x3F));                                   \
        } else if (c_ < 0x10000) {                                                          \
            (out)[(w)++] = (uint8_t)(0xE0 | (c_ >> 12));                                    \
            (out)[(w)++] = (uint8_t)(0x80 | ((c_ >> 6) & 0x3F));                            \
            (out)[(w)++] = (uint8_t)(0x80 | (c_ & 0x3F));                                   \
        } else {                                                                            \
            (out)[(w)++] = (uint8_t)(0xF0 | (c_ >> 18));                                    \
            (out)[(w)++] = (uint8_t)(0x80 | ((c_ >> 12) & 0x3F));                           \
            (out)[(w)++] = (uint8_t)(0x80 | ((c_ >> 6) & 0x3F));                            \
            (out)[(w)++] = (uint8_t)(0x80 | (c_ & 0x3F));                                   \
        }                                                                                   \
    } while (0)

/* The encoder without the GIL: from position (*at, *off) of the part `own` (a tuple,
 * which holds its items), the int64 code-point lengths of the items then the UTF-8
 * ("surrogatepass": a lone surrogate as its three bytes) of each, skipping an item i
 * with mask[i] == 0 (mask NULL: none skipped), written to out until fewer than the next
 * length's 8 bytes or the next code point's bytes are left of cap. Position: at < n the
 * length of item at; n <= at < 2n item at - n's code points from off; 2n the end.
 * Returns the bytes written, position advanced, or -1 (nothing meaningful written) when
 * an item it reaches is not td_plain. */
static Py_ssize_t
td_encode(PyObject *own, const uint8_t *mask, uint8_t *out, Py_ssize_t cap, Py_ssize_t *at_io,
          Py_ssize_t *off_io)
{
    Py_ssize_t n = PyTuple_GET_SIZE(own), at = *at_io, off = *off_io, w = 0;
    for (; at < n; at++) {
        if (mask && !mask[at]) continue;
        PyObject *t = PyTuple_GET_ITEM(own, at);
        if (!td_plain(t)) return -1;
        if (cap - w < 8) goto out;
        int64_t len = (int64_t)PyUnicode_GET_LENGTH(t);
        memcpy(out + w, &len, 8);
        w += 8;
    }
    for (; at < 2 * n; at++, off = 0) {
        Py_ssize_t i = at - n;
        if (mask && !mask[i]) continue;
        PyObject *t = PyTuple_GET_ITEM(own, i);
        if (i + TD_AHEAD < n) {
            const char *ahead = (const char *)PyTuple_GET_ITEM(own, i + TD_AHEAD);
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + 64);
        }
        if (!td_plain(t)) return -1;
        Py_ssize_t len = PyUnicode_GET_LENGTH(t);
        if (PyUnicode_IS_ASCII(t)) {
            Py_ssize_t take = len - off < cap - w ? len - off : cap - w;
            memcpy(out + w, PyUnicode_1BYTE_DATA(t) + off, (size_t)take);
            w += take;
            off += take;
            if (off < len) goto out;
            continue;
        }
        int kind = PyUnicode_KIND(t);
        const void *data = PyUnicode_DATA(t);
        /* the code points sure to fit (4 bytes each at most) without a check each, by
         * kind, then the rest checked one by one */
        Py_ssize_t sure = (cap - w) / 4 < len - off ? off + (cap - w) / 4 : len;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *d = (const Py_UCS1 *)data;
            for (; off < sure; off++) TD_PUT_UTF8(out, w, d[off]);
        } else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *d = (const Py_UCS2 *)data;
            for (; off < sure; off++) TD_PUT_UTF8(out, w, d[off]);
        } else {
            const Py_UCS4 *d = (const Py_UCS4 *)data;
            for (; off < sure; off++) TD_PUT_UTF8(out, w, d[off]);
        }
        for (; off < len; off++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, off);
            int need = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
            if (cap - w < need) goto out;
            TD_PUT_UTF8(out, w, c);
        }
    }
out:
    *at_io = at;
    *off_io = off;
    return w;
}

PyDoc_STRVAR(texts_encode_doc,
"texts_encode(texts, mask, buf, at, off) -> (at, off, written) or None\n\n"
"The next run of persist.text_digest's bytes for one part, written to the start of buf\n"
"(a bytearray of at least 8 bytes, exported to a view meanwhile: not resized) with\n"
"the GIL released: the int64 code-point lengths of texts (a tuple, native order), then\n"
"the UTF-8 ('surrogatepass') of each text, the items i with mask[i] == 0 left out (mask: bytes of\n"
"len(texts), or None). Position (at, off), n = len(texts): at < n the length of item at\n"
"(off 0); n <= at < 2n item at - n from its code point off; at == 2n the end. Starts\n"
"at (0, 0); each call writes as much as fits (a code point is never split: up to 3\n"
"bytes of buf may be left) and returns the position reached and the bytes written\n"
"(0 only at the end). None when an item reached is not an exact, compact str (the\n"
"caller hashes another way: the bytes of this run are not all written). TypeError\n"
"for wrong types, ValueError for a mask of another length, a buffer under 8 bytes or a\n"
"position outside the part. O(bytes written + items skipped).");

static PyObject *
texts_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_CheckExact(args[0]) ||
        !(args[1] == Py_None || PyBytes_CheckExact(args[1])) || !PyByteArray_CheckExact(args[2]) ||
        !PyLong_CheckExact(args[3]) ||
        !PyLong_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError, "texts_encode(texts: tuple, mask: bytes | None, "
                                         "buf: bytearray, at: int, off: int)");
        return NULL;
    }
    PyObject *own = args[0], *maskobj = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(own);
    Py_ssize_t at = PyLong_AsSsize_t(args[3]);
    if (at == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t off = PyLong_AsSsize_t(args[4]);
    if (off == -1 && PyErr_Occurred()) return NULL;
    if (maskobj != Py_None && PyBytes_GET_SIZE(maskobj) != n) {
        PyErr_SetString(PyExc_ValueError, "texts_encode: the mask's length is not the texts'");
        return NULL;
    }
    if (at < 0 || at > 2 * n || off < 0 || (off > 0 && (at < n || at == 2 * n))) {
        PyErr_SetString(PyExc_ValueError, "texts_encode: the position is outside the texts");
        return NULL;
    }
    if (off > 0) {
        PyObject *t = PyTuple_GET_ITEM(own, at - n);
        if (!td_plain(t) || off > PyUnicode_GET_LENGTH(t)) {
            PyErr_SetString(PyExc_ValueError, "texts_encode: the offset is outside the text");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (view.len < 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "texts_encode: the buffer holds fewer than 8 bytes");
        return NULL;
    }
    /* own and mask are immutable and held by the caller's arguments; the buffer is held
     * by the view (a bytearray cannot be resized while exported) */
    const uint8_t *mask = maskobj == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(maskobj);
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    written = td_encode(own, mask, (uint8_t *)view.buf, view.len, &at, &off);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (written < 0) Py_RETURN_NONE;
    return Py_BuildValue("(nnn)", at, off, written);
}

PyDoc_STRVAR(next_keyed_doc,
"next_keyed(rows, start, cols=None) -> int\n\n"
"The first position i >= start of rows (a list, or a list subclass: its storage read,\n"
"as load_inserts reads it) whose row is not plain or whose entry\n"
"has a key: a row is plain when it is an exact 2-tuple whose second item is exactly\n"
"store_setup's entry class with its key slot None; len(rows) when every row from\n"
"start on is plain and keyless (MemoryState._bulk_loadable's pass over the keys,\n"
"which looks at the row it returns itself). TypeError for wrong argument types,\n"
"ValueError for a negative start, OverflowError for one beyond a Py_ssize_t,\n"
"RuntimeError before record_setup or store_setup. With cols (an EntryColumns), the rows\n"
"are in the store's form, (seq, slot): a row is plain when its slot is live in cols,\n"
"and keyless when its key (in the slot's extras) is None.\n"
"O(len(rows) - start).");

static PyObject *
next_keyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3 || !PyList_Check(args[0]) || !PyLong_CheckExact(args[1]) ||
        (nargs == 3 && args[2] != Py_None && !Py_IS_TYPE(args[2], &EntryColumns_Type))) {
        PyErr_SetString(PyExc_TypeError,
                        "next_keyed(rows: list, start: int, cols: EntryColumns | None = None)");
        return NULL;
    }
    EntryColumnsObject *ec = nargs == 3 && args[2] != Py_None ? (EntryColumnsObject *)args[2]
                                                              : NULL;
    if (ec && !ins_empty) {
        PyErr_SetString(PyExc_RuntimeError, "next_keyed: store_setup() not called");
        return NULL;
    }
    if (!ins_entry_type) {
        PyErr_SetString(PyExc_RuntimeError, "next_keyed: record_setup() not called");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "next_keyed: start must be >= 0");
        return NULL;
    }
    PyObject *rows = args[0];
    Py_ssize_t n = PyList_GET_SIZE(rows), off_key = ins_entry_off[2], i;
    for (i = start; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 2) break;
        PyObject *entry = PyTuple_GET_ITEM(row, 1);
        if (ec) {
            SlotRow sr;
            if (!slot_row(ec, entry, &sr) || sr.key != Py_None) break;
            continue;
        }
        if (Py_TYPE(entry) != ins_entry_type || SLOT(entry, off_key) != Py_None) break;
    }
    return PyLong_FromSsize_t(i < n ? i : n);
}


/* texts_first / texts_groups take an ASCII str's hash (cached, or TD_HASH_BYTES) when
 * not every item has one cached (texts_ascii_hashes(); branch open33). 0: td_hash for
 * all then (the path before). */
static int td_ascii_hashes_on = 1;

/* str's hash of a one-byte-kind str's data (its cached value once computed), callable
 * without the GIL (it reads the process's hash secret only; _kernels_common.h). */
#define TD_HASH_BYTES(p, n) AM_HASH_BYTES((p), (n))

/* A 64-bit hash of n bytes and a salt (no Python API: without the GIL). */
static inline uint64_t
td_hash_mem(const uint8_t *p, size_t len, uint64_t salt)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)len * 0xff51afd7ed558ccdULL) ^ salt;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, len);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

/* A 64-bit hash of a compact str's kind and data (no Python API: without the GIL). */
static uint64_t
td_hash(PyObject *t)
{
    return td_hash_mem((const uint8_t *)PyUnicode_DATA(t),
                       (size_t)PyUnicode_GET_LENGTH(t) * (size_t)PyUnicode_KIND(t),
                       (uint64_t)PyUnicode_KIND(t));
}

/* Whether two compact strs are equal (a str is always in its smallest kind: equal
 * strs have the same kind, length and data). */
static int
td_equal(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

PyDoc_STRVAR(texts_first_doc,
"texts_first(texts) -> bytes or None\n\n"
"Which items of texts (a tuple) are the first appearance of their value: bytes of\n"
"len(texts), 1 at a first appearance, else 0 (the items dict.fromkeys(texts) keeps,\n"
"as texts_encode's mask), found by a table of its own with the GIL released (each\n"
"str's cached hash when all are cached, else a hash of its data; equal strs compared\n"
"by kind, length and data). None when an item is not an exact, compact str or with\n"
"2**31 texts or more. TypeError unless texts is an exact tuple, MemoryError if the\n"
"table cannot be had. O(total length) expected.");

/* texts_first and texts_groups (name: the caller's, for its TypeError): the table of first
 * appearances over own, and with with_gids each item's group number as well. Inlined
 * into each caller with with_gids a constant: each gets the loop it had on its own
 * (out of line, texts_first ran ~10% more instructions, the group numbers' tests). */
static inline __attribute__((always_inline)) PyObject *
texts_first_gids(PyObject *own, const char *name, int with_gids)
{
    if (!PyTuple_CheckExact(own)) {
        PyErr_Format(PyExc_TypeError, "%s: texts must be a tuple", name);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(own);
    if (n >= ((Py_ssize_t)1 << 31)) Py_RETURN_NONE;
    /* With the GIL: whether every str's hash is cached (the row reader computes them).
     * A hash once set never changes: then the table uses them, read without the GIL,
     * and reads no text's data for its own hash. Else, with td_ascii_hashes_on, an
     * ASCII str still goes by str's hash (its cached one, or computed from its bytes as
     * str's hash does, without the GIL) and only the others by td_hash: equal strs have
     * the same kind, so each value takes one way. (The reader hashes only the ASCII
     * texts it puts in a store: one text in eight is not ASCII at 1M, and without this
     * every text's data was read and hashed again, ~0.2 s of the digest thread, which
     * the open's thread waits for; branch open33.) */
    int hashed = 1;
    for (Py_ssize_t i = 0; i < n && hashed; i++) {
        PyObject *t = PyTuple_GET_ITEM(own, i);
        hashed = PyUnicode_CheckExact(t) && ((PyASCIIObject *)t)->hash != -1;
    }
    int ascii_hashed = !hashed && td_ascii_hashes_on;
    /* not yet shared: written without the GIL */
    PyObject *mask = PyBytes_FromStringAndSize(NULL, n);
    PyObject *gids = NULL;
    if (mask && with_gids) gids = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (!mask || (with_gids && !gids)) {
        Py_XDECREF(mask);
        return NULL;
    }
    uint8_t *first = (uint8_t *)PyBytes_AS_STRING(mask);
    int64_t *gid = gids ? (int64_t *)PyBytes_AS_STRING(gids) : NULL;
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    uint32_t *slots = NULL; /* 0: empty, else the position + 1 of a first appearance */
    int bad = 0, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    slots = (uint32_t *)calloc(cap, sizeof *slots);
    if (!slots) {
        nomem = 1;
    } else {
        int64_t groups = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = PyTuple_GET_ITEM(own, i);
            if (!td_plain(t)) {
                bad = 1;
                break;
            }
            uint64_t h;
            if (hashed) {
                h = (uint64_t)((PyASCIIObject *)t)->hash * 0x9E3779B97F4A7C15ULL;
            } else if (ascii_hashed && PyUnicode_IS_ASCII(t)) {
                Py_hash_t c = ((PyASCIIObject *)t)->hash;
                if (c == -1) c = TD_HASH_BYTES(PyUnicode_DATA(t), PyUnicode_GET_LENGTH(t));
                h = (uint64_t)c * 0x9E3779B97F4A7C15ULL;
            } else {
                h = td_hash(t);
            }
            size_t at = (size_t)(h >> 17) & (cap - 1);
            first[i] = 1;
            while (slots[at]) {
                Py_ssize_t j = (Py_ssize_t)slots[at] - 1;
                if (td_equal(PyTuple_GET_ITEM(own, j), t)) {
                    first[i] = 0;
                    if (gid) gid[i] = gid[j];
                    break;
                }
                at = (at + 1) & (cap - 1);
            }
            if (first[i]) {
                slots[at] = (uint32_t)(i + 1);
                if (gid) gid[i] = groups++;
            }
        }
        free(slots);
    }
    Py_END_ALLOW_THREADS
    if (nomem || bad) {
        Py_DECREF(mask);
        Py_XDECREF(gids);
        if (nomem) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    if (!gids) return mask;
    PyObject *out = PyTuple_Pack(2, mask, gids);
    Py_DECREF(mask);
    Py_DECREF(gids);
    return out;
}

static PyObject *
texts_ascii_hashes(PyObject *self, PyObject *on)
{
    return bool_knob(&td_ascii_hashes_on, on, "texts_ascii_hashes: on must be a bool");
}

static PyObject *
texts_first(PyObject *self, PyObject *own)
{
    return texts_first_gids(own, "texts_first", 0);
}


PyDoc_STRVAR(texts_groups_doc,
"texts_groups(texts) -> (first, gids) or None\n\n"
"texts_first's mask and each item's group number: first the bytes of len(texts), 1 at\n"
"an item that is its value's first appearance, else 0; gids the bytes of an int64\n"
"array giving each item the number of its value, numbered 0, 1, ... by first\n"
"appearance (group_texts' gids, and the number of groups is the count of ones in\n"
"first). Found by texts_first's table with the GIL released. None when an item is not\n"
"an exact, compact str or with 2**31 texts or more. TypeError unless texts is an\n"
"exact tuple, MemoryError if the table cannot be had. O(total length) expected.");

static PyObject *
texts_groups(PyObject *self, PyObject *own)
{
    return texts_first_gids(own, "texts_groups", 1);
}


/* ------------------------------------------------------------------ the store's texts
 *
 * texts_groups and texts_encode over an EntryColumns' slots instead of strs (branch
 * open42): a text is its slot's strict UTF-8 (ASCII flagged), so equal bytes are equal
 * strs, and text_digest's bytes are the code-point lengths then those very bytes. They
 * read the slots with the GIL released, the store pinned meanwhile (ec->pins: no put,
 * release or compaction can run, so no text moves, changes or goes). The slots are the
 * bytes of int64 slot numbers, each checked live as it is read. */

/* The live slot numbered s of ec, or NULL (out of range or not live). */
static inline const EcSlot *
sl_live(const EntryColumnsObject *ec, int64_t s)
{
    if (s < 0 || s >= ec->next) return NULL;
    const EcSlot *e = ec_at(ec, s);
    return (e->flags & EC_LIVE) ? e : NULL;
}

/* A text's code points from its strict UTF-8: the bytes that do not continue one. */
static inline int64_t
sl_chars(const EcSlot *e, const char *p)
{
    if (e->flags & EC_ASCII) return (int64_t)e->len;
    int64_t n = 0;
    const uint8_t *q = (const uint8_t *)p;
    for (uint32_t i = 0; i < e->len; i++) n += (q[i] & 0xC0) != 0x80;
    return n;
}

/* The arguments' common checks: cols an EntryColumns, slots bytes of int64s. 0, or -1
 * with TypeError / ValueError. */
static int
sl_args(PyObject *cols, PyObject *slots, const char *name)
{
    if (!Py_IS_TYPE(cols, &EntryColumns_Type) || !PyBytes_CheckExact(slots)) {
        PyErr_Format(PyExc_TypeError, "%s: cols must be an EntryColumns and slots bytes", name);
        return -1;
    }
    if (PyBytes_GET_SIZE(slots) % 8) {
        PyErr_Format(PyExc_ValueError, "%s: slots' length is not a multiple of 8", name);
        return -1;
    }
    return 0;
}

/* How many texts ahead slots_groups hashes a text and asks for its home slot. */
#define SL_AHEAD 8

/* The live slot numbered s of ec (NULL: not one) and the table's hash of its text: the
 * reader's str hash c when not -1 and the text is ASCII, else an ASCII text's str hash
 * computed from its bytes (TD_HASH_BYTES), the others' bytes hashed (an ASCII text and
 * another are never equal: each value takes one way), spread by a multiply. */
static inline const EcSlot *
sl_keyed(const EntryColumnsObject *ec, int64_t s, int64_t c, uint64_t *h)
{
    const EcSlot *e = sl_live(ec, s);
    if (!e) return NULL;
    const char *p = ec_text_ptr(ec, e);
    if (e->flags & EC_ASCII) {
        Py_hash_t x = c != -1 ? (Py_hash_t)c : TD_HASH_BYTES(p, e->len);
        *h = (uint64_t)x * 0x9E3779B97F4A7C15ULL;
    } else {
        *h = td_hash_mem((const uint8_t *)p, e->len, 0);
    }
    return e;
}

PyDoc_STRVAR(slots_groups_doc,
"slots_groups(cols, slots, hashes) -> (first, gids) or None\n\n"
"texts_groups of the texts of cols' (an EntryColumns) slots numbered by slots (the bytes\n"
"of an int64 array): the same first and gids as texts_groups over those texts as strs,\n"
"found from the slots' UTF-8 (equal bytes: equal texts) with the GIL released, the store\n"
"pinned meanwhile. hashes: b'' or 8 bytes a slot (int64, native order): a value other\n"
"than -1 is taken as str's hash of that text when it is ASCII (the reader's\n"
"FoldedRows.hashes), else an ASCII text's is computed as str's, the others' bytes\n"
"hashed. None when a slot is not live or with 2**31 slots or more. TypeError for wrong\n"
"types, ValueError for lengths that are not 8 a slot, MemoryError if the table cannot be\n"
"had. O(total length) expected.");

static PyObject *
slots_groups(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "slots_groups(cols, slots, hashes)");
        return NULL;
    }
    if (sl_args(args[0], args[1], "slots_groups") < 0) return NULL;
    if (!PyBytes_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "slots_groups: hashes must be bytes");
        return NULL;
    }
    EntryColumnsObject *ec = (EntryColumnsObject *)args[0];
    Py_ssize_t n = PyBytes_GET_SIZE(args[1]) / 8;
    if (PyBytes_GET_SIZE(args[2]) && PyBytes_GET_SIZE(args[2]) != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "slots_groups: hashes must be b'' or 8 bytes a slot");
        return NULL;
    }
    if (n >= ((Py_ssize_t)1 << 31)) Py_RETURN_NONE;
    /* the arguments are immutable bytes held by the caller */
    const int64_t *sl = (const int64_t *)PyBytes_AS_STRING(args[1]);
    const int64_t *hs = PyBytes_GET_SIZE(args[2]) ? (const int64_t *)PyBytes_AS_STRING(args[2])
                                                   : NULL;
    PyObject *mask = PyBytes_FromStringAndSize(NULL, n);
    PyObject *gids = mask ? PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t)) : NULL;
    if (!mask || !gids) {
        Py_XDECREF(mask);
        return NULL;
    }
    uint8_t *first = (uint8_t *)PyBytes_AS_STRING(mask);
    int64_t *gid = (int64_t *)PyBytes_AS_STRING(gids);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    int bad = 0, nomem = 0;
    ec->pins++;
    Py_BEGIN_ALLOW_THREADS
    /* a slot: the position + 1 of a first appearance (0: empty) in the low 32 bits, the
     * top 32 bits of its hash above them (compared before the text: a probe that meets
     * another text reads neither its slot nor its bytes) */
    uint64_t *table = (uint64_t *)calloc(cap, sizeof *table);
    const EcSlot **es = table ? (const EcSlot **)malloc((size_t)(n ? n : 1) * sizeof *es) : NULL;
    if (!table || !es) {
        nomem = 1;
    } else {
        /* each text's slot and hash SL_AHEAD texts ahead, its home slot in the table
         * asked for from memory then (a table of 1M texts is 8 MiB: each probe missed
         * the caches) */
        const EcSlot *ring_e[SL_AHEAD];
        uint64_t ring_h[SL_AHEAD];
        for (Py_ssize_t k = 0; k < SL_AHEAD && k < n; k++) {
            ring_e[k] = sl_keyed(ec, sl[k], hs ? hs[k] : -1, &ring_h[k]);
            if (ring_e[k]) __builtin_prefetch(&table[(size_t)(ring_h[k] >> 17) & (cap - 1)]);
        }
        int64_t groups = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const EcSlot *e = ring_e[i % SL_AHEAD];
            uint64_t h = ring_h[i % SL_AHEAD];
            if (!e) {
                bad = 1;
                break;
            }
            Py_ssize_t next = i + SL_AHEAD;
            if (next < n) {
                if (next + SL_AHEAD < n) {
                    int64_t a = sl[next + SL_AHEAD];
                    if (a >= 0 && a < ec->next) __builtin_prefetch(ec_at(ec, a));
                }
                const EcSlot *ne = sl_keyed(ec, sl[next], hs ? hs[next] : -1, &ring_h[i % SL_AHEAD]);
                ring_e[i % SL_AHEAD] = ne;
                if (ne)
                    __builtin_prefetch(&table[(size_t)(ring_h[i % SL_AHEAD] >> 17) & (cap - 1)]);
            }
            es[i] = e;
            const char *p = ec_text_ptr(ec, e);
            size_t at = (size_t)(h >> 17) & (cap - 1);
            first[i] = 1;
            uint64_t tag = h & 0xFFFFFFFF00000000ULL;
            while (table[at]) {
                if ((table[at] & 0xFFFFFFFF00000000ULL) != tag) {
                    at = (at + 1) & (cap - 1);
                    continue;
                }
                Py_ssize_t j = (Py_ssize_t)(table[at] & 0xFFFFFFFFu) - 1;
                const EcSlot *o = es[j];
                if (o->len == e->len && ((o->flags ^ e->flags) & EC_ASCII) == 0 &&
                    memcmp(ec_text_ptr(ec, o), p, e->len) == 0) {
                    first[i] = 0;
                    gid[i] = gid[j];
                    break;
                }
                at = (at + 1) & (cap - 1);
            }
            if (first[i]) {
                table[at] = tag | (uint64_t)(i + 1);
                gid[i] = groups++;
            }
        }
    }
    free(table);
    free(es);
    Py_END_ALLOW_THREADS
    ec->pins--;
    if (nomem || bad) {
        Py_DECREF(mask);
        Py_DECREF(gids);
        if (nomem) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    PyObject *out = PyTuple_Pack(2, mask, gids);
    Py_DECREF(mask);
    Py_DECREF(gids);
    return out;
}

PyDoc_STRVAR(slots_encode_doc,
"slots_encode(cols, slots, mask, buf, at, off) -> (at, off, written) or None\n\n"
"texts_encode over the texts of cols' (an EntryColumns) slots numbered by slots (the\n"
"bytes of an int64 array): the next run of the same bytes (the int64 code-point lengths,\n"
"then the UTF-8 of each text, the items with mask[i] == 0 left out), read from the slots\n"
"with the GIL released, the store pinned meanwhile. Position (at, off), n the number of\n"
"slots: at < n the length of item at (off 0); n <= at < 2n item at - n from its byte off\n"
"(a run may end inside a code point); 2n the end. Returns the position reached and the\n"
"bytes written (0 only at the end); None when a slot reached is not live. TypeError for\n"
"wrong types, ValueError for a mask of another length, slots not 8 bytes each, a buffer\n"
"under 8 bytes or a position outside the texts. O(bytes written + items skipped).");

static PyObject *
slots_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !(args[2] == Py_None || PyBytes_CheckExact(args[2])) ||
        !PyByteArray_CheckExact(args[3]) || !PyLong_CheckExact(args[4]) ||
        !PyLong_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "slots_encode(cols: EntryColumns, slots: bytes, mask: "
                                         "bytes | None, buf: bytearray, at: int, off: int)");
        return NULL;
    }
    if (sl_args(args[0], args[1], "slots_encode") < 0) return NULL;
    EntryColumnsObject *ec = (EntryColumnsObject *)args[0];
    PyObject *maskobj = args[2];
    Py_ssize_t n = PyBytes_GET_SIZE(args[1]) / 8;
    const int64_t *sl = (const int64_t *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t at = PyLong_AsSsize_t(args[4]);
    if (at == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t off = PyLong_AsSsize_t(args[5]);
    if (off == -1 && PyErr_Occurred()) return NULL;
    if (maskobj != Py_None && PyBytes_GET_SIZE(maskobj) != n) {
        PyErr_SetString(PyExc_ValueError, "slots_encode: the mask's length is not the slots'");
        return NULL;
    }
    if (at < 0 || at > 2 * n || off < 0 || (off > 0 && (at < n || at == 2 * n))) {
        PyErr_SetString(PyExc_ValueError, "slots_encode: the position is outside the texts");
        return NULL;
    }
    if (off > 0) {
        const EcSlot *e = sl_live(ec, sl[at - n]);
        if (!e || off >= (Py_ssize_t)e->len) {
            PyErr_SetString(PyExc_ValueError, "slots_encode: the offset is outside the text");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (view.len < 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "slots_encode: the buffer holds fewer than 8 bytes");
        return NULL;
    }
    const uint8_t *mask = maskobj == Py_None ? NULL : (const uint8_t *)PyBytes_AS_STRING(maskobj);
    uint8_t *out = (uint8_t *)view.buf;
    Py_ssize_t cap = view.len, w = 0;
    int bad = 0;
    ec->pins++;
    Py_BEGIN_ALLOW_THREADS
    for (; at < n; at++) {
        if (mask && !mask[at]) continue;
        if (at + TD_AHEAD < n) {
            int64_t a = sl[at + TD_AHEAD];
            if (a >= 0 && a < ec->next) __builtin_prefetch(ec_at(ec, a));
        }
        const EcSlot *e = sl_live(ec, sl[at]);
        if (!e) {
            bad = 1;
            goto done;
        }
        if (cap - w < 8) goto done;
        int64_t len = sl_chars(e, ec_text_ptr(ec, e));
        memcpy(out + w, &len, 8);
        w += 8;
    }
    for (; at < 2 * n; at++, off = 0) {
        Py_ssize_t i = at - n;
        if (mask && !mask[i]) continue;
        const EcSlot *e = sl_live(ec, sl[i]);
        if (!e) {
            bad = 1;
            goto done;
        }
        Py_ssize_t len = (Py_ssize_t)e->len;
        Py_ssize_t take = len - off < cap - w ? len - off : cap - w;
        if (take > 0) memcpy(out + w, ec_text_ptr(ec, e) + off, (size_t)take);
        w += take;
        off += take;
        if (off < len) goto done;
    }
done:
    Py_END_ALLOW_THREADS
    ec->pins--;
    PyBuffer_Release(&view);
    if (bad) Py_RETURN_NONE;
    return Py_BuildValue("(nnn)", at, off, w);
}


static PyMethodDef methods[] = {
    {"add_text", add_text, METH_VARARGS, add_text_doc},
    {"acquire_all", acquire_all, METH_VARARGS, acquire_all_doc},
    {"count_words", count_words, METH_VARARGS, count_words_doc},
    {"text_masks", text_masks, METH_VARARGS, text_masks_doc},
    {"bits_add_sparse", bits_add_sparse, METH_VARARGS, bits_add_sparse_doc},
    {"bits_unmark", bits_unmark, METH_VARARGS, bits_unmark_doc},
    {"bits_add_dense", bits_add_dense, METH_VARARGS, bits_add_dense_doc},
    {"bits_word_maxima", bits_word_maxima, METH_VARARGS, bits_word_maxima_doc},
    {"bits_maxima", bits_maxima, METH_VARARGS, bits_maxima_doc},
    {"bits_select", bits_select, METH_VARARGS, bits_select_doc},
    {"bits_count", bits_count, METH_VARARGS, bits_count_doc},
    {"bits_set", bits_set, METH_VARARGS, bits_set_doc},
    {"bits_join", bits_join, METH_VARARGS, bits_join_doc},
    {"bits_join_slice", bits_join_slice, METH_VARARGS, bits_join_slice_doc},
    {"lists_of_ids", lists_of_ids, METH_VARARGS, lists_of_ids_doc},
    {"bits_from_masks", bits_from_masks, METH_VARARGS, bits_from_masks_doc},
    {"bits_rows_from_masks", bits_rows_from_masks, METH_VARARGS, bits_rows_from_masks_doc},
    {"add_text_known", add_text_known, METH_VARARGS, add_text_known_doc},
    {"fold_ascii", fold_ascii, METH_O, fold_ascii_doc},
    {"token_cache", token_cache, METH_NOARGS, token_cache_doc},
    {"add_text_cached", add_text_cached, METH_VARARGS, add_text_cached_doc},
    {"add_texts_cached", add_texts_cached, METH_VARARGS, add_texts_cached_doc},
    {"_active_bits_builds", active_bits_builds_get, METH_NOARGS, active_bits_builds_doc},
    {"cache_forget", cache_forget, METH_VARARGS, cache_forget_doc},
    {"fold_hash", fold_hash, METH_O, fold_hash_doc},
    {"fold_hash_direct", fold_hash_direct, METH_O, fold_hash_direct_doc},
    {"texts_encode", (PyCFunction)(void (*)(void))texts_encode, METH_FASTCALL, texts_encode_doc},
    {"texts_first", texts_first, METH_O, texts_first_doc},
    {"texts_groups", texts_groups, METH_O, texts_groups_doc},
    {"rows_slots", (PyCFunction)(void (*)(void))rows_slots, METH_FASTCALL, rows_slots_doc},
    {"slots_groups", (PyCFunction)(void (*)(void))slots_groups, METH_FASTCALL, slots_groups_doc},
    {"slots_encode", (PyCFunction)(void (*)(void))slots_encode, METH_FASTCALL, slots_encode_doc},
    {"fold_hash_table", fold_hash_table, METH_O, fold_hash_table_doc},
    {"dup_key", (PyCFunction)(void (*)(void))dup_key, METH_FASTCALL, dup_key_doc},
    {"dkey_direct", dkey_direct_knob, METH_O, dkey_direct_knob_doc},
    {"group_ahead", group_ahead, METH_O, group_ahead_doc},
    {"texts_ascii_hashes", texts_ascii_hashes, METH_O, texts_ascii_hashes_doc},
    {"dup_key_folded", (PyCFunction)(void (*)(void))dup_key_folded, METH_FASTCALL,
     dup_key_folded_doc},
    {"store_setup", store_setup, METH_VARARGS, store_setup_doc},
    {"record_setup", record_setup, METH_VARARGS, record_setup_doc},
    {"set_grow_direct", set_grow_direct, METH_O, set_grow_direct_doc},
    {"store_inserts", (PyCFunction)(void (*)(void))store_inserts, METH_FASTCALL, store_inserts_doc},
    {"load_inserts", (PyCFunction)(void (*)(void))load_inserts, METH_FASTCALL, load_inserts_doc},
    {"add_groups_new", (PyCFunction)(void (*)(void))add_groups_new, METH_FASTCALL, add_groups_new_doc},
    {"lower_text", lower_text, METH_O, lower_text_doc},
    {"iso_utc", iso_utc, METH_O, iso_utc_doc},
    {"rows_setup", rows_setup, METH_VARARGS, rows_setup_doc},
    {"encode_rows", encode_rows, METH_O, encode_rows_doc},
    {"decode_rows", decode_rows, METH_VARARGS, decode_rows_doc},
    {"group_texts", group_texts, METH_O, group_texts_doc},
    {"restore_columns", restore_columns, METH_VARARGS, restore_columns_doc},
    {"rows_texts", (PyCFunction)(void (*)(void))rows_texts, METH_FASTCALL, rows_texts_doc},
    {"next_keyed", (PyCFunction)(void (*)(void))next_keyed, METH_FASTCALL, next_keyed_doc},
    {"cache_entries", cache_entries, METH_O, cache_entries_doc},
    {"visit_heap", visit_heap, METH_VARARGS, visit_heap_doc},
    {"visit_pop", visit_pop, METH_VARARGS, visit_pop_doc},
    {"visit_select", visit_select, METH_VARARGS, visit_select_doc},
    {"flat_first", flat_first, METH_VARARGS, flat_first_doc},
    {"visit_order", visit_order, METH_VARARGS, visit_order_doc},
    {"wmax_chunks", wmax_chunks, METH_VARARGS, wmax_chunks_doc},
    {"bits_select_chunks", bits_select_chunks, METH_VARARGS, bits_select_chunks_doc},
    /* mainjob18 */
    {"query_words", (PyCFunction)(void (*)(void))query_words, METH_FASTCALL, query_words_doc},
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
    if (hash_bytes_agree() < 0) return NULL;
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    array_type = import_array_type();
    if (!array_type || vocab_names_init() < 0) return NULL;
    array_append = PyObject_GetAttrString(array_type, "append");
    if (!array_append) return NULL;
    /* array.append is a method descriptor of a METH_O C function: called directly by
     * add_text_known (anything else, e.g. a future signature, goes through the call). */
    if (Py_IS_TYPE(array_append, &PyMethodDescr_Type)) {
        PyMethodDef *def = ((PyMethodDescrObject *)array_append)->d_method;
        if (def->ml_flags == METH_O) array_append_fn = def->ml_meth;
    }
    if (array_layout_check() < 0) return NULL;
    fold_tab_init();
    {
        PyObject *lower = PyObject_GetAttrString((PyObject *)&PyUnicode_Type, "lower");
        if (!lower) return NULL;
        if (Py_IS_TYPE(lower, &PyMethodDescr_Type)) {
            PyMethodDef *def = ((PyMethodDescrObject *)lower)->d_method;
            if (def->ml_flags == METH_NOARGS) str_lower_fn = def->ml_meth;
        }
        Py_DECREF(lower);
    }
    array_one = PyObject_CallFunction(array_type, "s(i)", "i", 0);
    if (!array_one) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && dt_module_add(m) < 0) Py_CLEAR(m);
    if (m && it_module_add(m) < 0) Py_CLEAR(m);
    if (m && gt_module_add(m) < 0) Py_CLEAR(m);
    if (m && ec_module_add(m) < 0) Py_CLEAR(m);
    return m;
}
