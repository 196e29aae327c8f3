/* DupTable: MemoryState._dups as an open-addressing table (included by _cwordoverlap.c).
 *
 * The state maps each duplicate key (a 30-bit int, state._dup_key) to the one live record
 * with it, or to a dict of two or more. A dict spends a ~42 B slot (at 1M) and a 28-32 B
 * int object on each key; this table keeps the key as a uint32 beside a reference:
 * 12 B a slot, at a load between 0.5 and 0.7 (17-24 B a key).
 *
 * Layout: two arrays of `cap` slots, `keys` (DT_EMPTY where free: every stored key is
 * below 2**30) and `vals` (a strong reference where the key is stored, NULL where
 * free). The probes, growth and backward-shift delete are _oatable.h's (shared with
 * IdTable and GroupTable): a key's home slot is its mixed bits scaled to cap, linear
 * probing, no tombstones (every key reachable from its home without crossing a free
 * slot: _check), a load between 0.5 and 0.7 (below 1/8 the table shrinks). A key is
 * found by comparing the keys alone.
 *
 * Python sees a mapping with int keys in [0, 2**30) (others: absent for reads, refused
 * for writes), iteration in slot order (not insertion order) that raises RuntimeError
 * when a key came or went since it began, and two calls that are _link's and _unlink's
 * group steps in one: join(key, rec) and leave(key, rec). It takes part in the cycle
 * collector as a dict does. C callers (store_inserts) use dt_reserve and dt_join.
 */

#define DT_EMPTY 0xFFFFFFFFu
#define DT_KEY_LIMIT (1u << 30)

typedef struct {
    PyObject_HEAD
    Py_ssize_t cap;   /* slots (0: no arrays yet) */
    Py_ssize_t used;  /* keys stored */
    uint32_t *keys;   /* cap keys, DT_EMPTY where free */
    PyObject **vals;  /* cap strong references, NULL where free */
    uint64_t changes; /* bumped when a key comes or goes or slots move: iterators check it */
} DupTableObject;

static PyTypeObject DupTable_Type;
static PyTypeObject DupTableIter_Type;

#define OA_PREFIX dt
#define OA_TABLE DupTableObject
#define OA_TAGS keys
#define OA_VALS vals
#define OA_VAL PyObject *
#define OA_TAG_FREE DT_EMPTY
#define OA_VAL_FREE NULL
#define OA_IS_FREE(tags, vals, i) ((tags)[i] == DT_EMPTY)
#include "_oatable.h"

/* The slot holding key, or -1. */
static Py_ssize_t
dt_find(const DupTableObject *t, uint32_t key)
{
    Py_ssize_t cap = t->cap;
    if (cap == 0) return -1;
    const uint32_t *keys = t->keys;
    Py_ssize_t i = oa_home(key, cap);
    for (;;) {
        uint32_t k = keys[i];
        if (k == key) return i;
        if (k == DT_EMPTY) return -1;
        if (++i == cap) i = 0;
    }
}

/* table[key] = val (a new reference taken). 0 or -1 (MemoryError, nothing changed). */
static int
dt_set(DupTableObject *t, uint32_t key, PyObject *val)
{
    Py_ssize_t i = dt_find(t, key);
    if (i >= 0) {
        PyObject *old = t->vals[i];
        t->vals[i] = Py_NewRef(val);
        Py_DECREF(old); /* last: the table is whole if this runs code */
        return 0;
    }
    if (dt_reserve(t, 1) < 0) return -1;
    dt_place(t->keys, t->vals, t->cap, key, Py_NewRef(val));
    t->used++;
    t->changes++;
    return 0;
}

/* Free slot i (holding a key) and return its reference (the caller's to release once
 * it is done with the table): the run after it shifts back over the hole. */
static PyObject *
dt_take(DupTableObject *t, Py_ssize_t i)
{
    PyObject *old = t->vals[i];
    dt_free_slot(t, i);
    return old;
}

/* _link's group step: key's group is rec alone when it had none, gains rec when it is a
 * dict, and becomes {old: None, rec: None} when it was one record old. 1 in that last
 * case (a new group of two: the caller files key in _dup_keys), 0 otherwise, -1 on an
 * error (a failed allocation: the table as it was, or the dict with rec). */
static int
dt_join(DupTableObject *t, uint32_t key, PyObject *rec)
{
    Py_ssize_t i = dt_find(t, key);
    if (i < 0) return dt_set(t, key, rec);
    PyObject *group = t->vals[i];
    Py_INCREF(group); /* rec's __hash__ / __eq__ run code that may drop table[key] */
    if (PyDict_Check(group)) {
        int err = PyDict_SetItem(group, rec, Py_None);
        Py_DECREF(group);
        return err;
    }
    PyObject *pair = PyDict_New();
    int err = pair ? 0 : -1;
    if (!err) err = PyDict_SetItem(pair, group, Py_None);
    if (!err) err = PyDict_SetItem(pair, rec, Py_None);
    if (!err) err = dt_set(t, key, pair); /* finds the key again: nothing is assumed */
    Py_XDECREF(pair);
    Py_DECREF(group);
    return err ? -1 : 1;
}

/* 1: *out is o's table key; 0: o is no table key (not an int, or outside [0, 2**30));
 * -1: an error. */
static int
dt_key(PyObject *o, uint32_t *out)
{
    if (!PyLong_Check(o)) return 0;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < 0 || v >= (long)DT_KEY_LIMIT) return 0;
    *out = (uint32_t)v;
    return 1;
}

/* dt_key for a write: TypeError / ValueError for what is no table key. */
static int
dt_key_strict(PyObject *o, uint32_t *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "DupTable keys are ints, not %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    int r = dt_key(o, out);
    if (r == 0) PyErr_SetString(PyExc_ValueError, "DupTable keys are ints in [0, 2**30)");
    return r == 1 ? 0 : -1;
}

static PyObject *
DupTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "DupTable() takes no arguments");
        return NULL;
    }
    DupTableObject *t = (DupTableObject *)type->tp_alloc(type, 0);
    if (!t) return NULL;
    t->cap = t->used = 0;
    t->keys = NULL;
    t->vals = NULL;
    t->changes = 0;
    return (PyObject *)t;
}

/* Release every reference and the arrays (the table empty first: a release may run code
 * that reads it). */
static int
DupTable_clear_impl(DupTableObject *t)
{
    uint32_t *keys = t->keys;
    PyObject **vals = t->vals;
    Py_ssize_t cap = t->cap;
    t->keys = NULL;
    t->vals = NULL;
    t->cap = t->used = 0;
    t->changes++;
    for (Py_ssize_t i = 0; i < cap; i++) Py_XDECREF(vals[i]);
    PyMem_Free(keys);
    PyMem_Free(vals);
    return 0;
}

static int
DupTable_tp_clear(PyObject *self)
{
    return DupTable_clear_impl((DupTableObject *)self);
}

static int
DupTable_traverse(PyObject *self, visitproc visit, void *arg)
{
    DupTableObject *t = (DupTableObject *)self;
    for (Py_ssize_t i = 0; i < t->cap; i++) Py_VISIT(t->vals[i]);
    return 0;
}

static void
DupTable_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    DupTable_clear_impl((DupTableObject *)self);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t
DupTable_len(PyObject *self)
{
    return ((DupTableObject *)self)->used;
}

static PyObject *
DupTable_subscript(PyObject *self, PyObject *key)
{
    uint32_t k;
    int r = dt_key(key, &k);
    if (r < 0) return NULL;
    Py_ssize_t i = r ? dt_find((DupTableObject *)self, k) : -1;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return Py_NewRef(((DupTableObject *)self)->vals[i]);
}

static int
DupTable_ass_subscript(PyObject *self, PyObject *key, PyObject *val)
{
    DupTableObject *t = (DupTableObject *)self;
    uint32_t k;
    if (val) {
        if (dt_key_strict(key, &k) < 0) return -1;
        return dt_set(t, k, val);
    }
    int r = dt_key(key, &k);
    if (r < 0) return -1;
    Py_ssize_t i = r ? dt_find(t, k) : -1;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    Py_DECREF(dt_take(t, i));
    return 0;
}

static int
DupTable_contains(PyObject *self, PyObject *key)
{
    uint32_t k;
    int r = dt_key(key, &k);
    if (r <= 0) return r;
    return dt_find((DupTableObject *)self, k) >= 0;
}

PyDoc_STRVAR(DupTable_get_doc,
"get(key, default=None, /) -> object\n\n"
"table[key] if key is stored, else default (also for a key that is no int in\n"
"[0, 2**30)). O(1) expected.");

static PyObject *
DupTable_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get() takes 1 or 2 arguments");
        return NULL;
    }
    uint32_t k;
    int r = dt_key(args[0], &k);
    if (r < 0) return NULL;
    Py_ssize_t i = r ? dt_find((DupTableObject *)self, k) : -1;
    if (i >= 0) return Py_NewRef(((DupTableObject *)self)->vals[i]);
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

PyDoc_STRVAR(DupTable_join_doc,
"join(key, rec, /) -> bool\n\n"
"MemoryState._link's duplicate-group step: table[key] = rec when key is absent, rec\n"
"added to the group when table[key] is a dict, table[key] = {old: None, rec: None} when\n"
"it was one record old. True in that last case (a new group of two). TypeError /\n"
"ValueError for a key that is no int in [0, 2**30). O(1) expected.");

static PyObject *
DupTable_join(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "join() takes 2 arguments");
        return NULL;
    }
    uint32_t k;
    if (dt_key_strict(args[0], &k) < 0) return NULL;
    int r = dt_join((DupTableObject *)self, k, args[1]);
    if (r < 0) return NULL;
    return Py_NewRef(r ? Py_True : Py_False);
}

PyDoc_STRVAR(DupTable_leave_doc,
"leave(key, rec, /) -> bool\n\n"
"MemoryState._unlink's duplicate-group step: when table[key] is a dict, rec leaves it\n"
"(KeyError if it is not there) and a group left with one record becomes that record\n"
"(True returned: the caller drops key from _dup_keys); otherwise key is deleted.\n"
"KeyError when key is not stored. O(1) expected.");

static PyObject *
DupTable_leave(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "leave() takes 2 arguments");
        return NULL;
    }
    DupTableObject *t = (DupTableObject *)self;
    PyObject *key = args[0], *rec = args[1];
    uint32_t k;
    int r = dt_key(key, &k);
    if (r < 0) return NULL;
    Py_ssize_t i = r ? dt_find(t, k) : -1;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    PyObject *group = t->vals[i];
    if (!PyDict_Check(group)) {
        Py_DECREF(dt_take(t, i));
        Py_RETURN_FALSE;
    }
    Py_INCREF(group);
    if (PyDict_DelItem(group, rec) < 0) {
        Py_DECREF(group);
        return NULL;
    }
    int left_one = PyDict_GET_SIZE(group) == 1;
    if (left_one) {
        Py_ssize_t pos = 0;
        PyObject *first, *none;
        PyDict_Next(group, &pos, &first, &none); /* next(iter(group)) */
        Py_INCREF(first);
        int err = dt_set(t, k, first);
        Py_DECREF(first);
        if (err < 0) {
            Py_DECREF(group);
            return NULL;
        }
    }
    Py_DECREF(group);
    return Py_NewRef(left_one ? Py_True : Py_False);
}

PyDoc_STRVAR(DupTable_reserve_doc,
"reserve(n, /) -> None\n\n"
"Room for n more keys without growing (a bulk load's one allocation, at a load of 0.7\n"
"once they are in). ValueError for n < 0. O(len(table) + n).");

static PyObject *
DupTable_reserve(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "reserve(): n < 0");
        return NULL;
    }
    if (dt_reserve_to((DupTableObject *)self, n, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(DupTable_check_doc,
"_check() -> None\n\n"
"Assert the layout's invariants (AssertionError naming the first broken one): the\n"
"count, a free slot, keys below 2**30 each once with a reference, none without, each\n"
"reachable from its home without crossing a free slot. O(capacity).");

static PyObject *
DupTable_check(PyObject *self, PyObject *unused)
{
    DupTableObject *t = (DupTableObject *)self;
    const char *bad = NULL;
    Py_ssize_t n = 0;
    if (t->cap == 0) {
        if (t->used != 0 || t->keys || t->vals) bad = "no arrays but keys";
    } else if (t->cap < OA_MIN_CAP || t->used * 10 > t->cap * 7) {
        bad = "capacity below 8 or load above 0.7";
    }
    for (Py_ssize_t i = 0; !bad && i < t->cap; i++) {
        uint32_t k = t->keys[i];
        if (k == DT_EMPTY) {
            if (t->vals[i]) bad = "a reference in a free slot";
            continue;
        }
        n++;
        if (k >= DT_KEY_LIMIT) bad = "a key above 2**30";
        else if (!t->vals[i]) bad = "a key without a reference";
        else if (dt_find(t, k) != i) bad = "a key twice, or not reachable from its home";
        else if (dt_gap(t, k, i)) bad = "a free slot between a key and its home";
    }
    if (!bad && n != t->used) bad = "the count is not the keys'";
    if (bad) {
        PyErr_SetString(PyExc_AssertionError, bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
DupTable_sizeof(PyObject *self, PyObject *unused)
{
    DupTableObject *t = (DupTableObject *)self;
    return PyLong_FromSsize_t((Py_ssize_t)Py_TYPE(self)->tp_basicsize +
                              t->cap * (Py_ssize_t)(sizeof(uint32_t) + sizeof(PyObject *)));
}

/* ---- iteration: keys, values or items in slot order */

typedef struct {
    PyObject_HEAD
    DupTableObject *table; /* NULL once exhausted */
    Py_ssize_t pos;
    uint64_t changes;
    int kind; /* 0 keys, 1 values, 2 items */
} DupTableIterObject;

static PyObject *
dt_iter_new(PyObject *self, int kind)
{
    DupTableIterObject *it = PyObject_GC_New(DupTableIterObject, &DupTableIter_Type);
    if (!it) return NULL;
    it->table = (DupTableObject *)Py_NewRef(self);
    it->pos = 0;
    it->changes = ((DupTableObject *)self)->changes;
    it->kind = kind;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *
DupTable_iter(PyObject *self)
{
    return dt_iter_new(self, 0);
}

static PyObject *
DupTable_keys(PyObject *self, PyObject *unused)
{
    return dt_iter_new(self, 0);
}

static PyObject *
DupTable_values(PyObject *self, PyObject *unused)
{
    return dt_iter_new(self, 1);
}

static PyObject *
DupTable_items(PyObject *self, PyObject *unused)
{
    return dt_iter_new(self, 2);
}

static PyObject *
DupTableIter_next(PyObject *self)
{
    DupTableIterObject *it = (DupTableIterObject *)self;
    DupTableObject *t = it->table;
    if (!t) return NULL;
    if (t->changes != it->changes) {
        PyErr_SetString(PyExc_RuntimeError, "DupTable changed during iteration");
        return NULL;
    }
    it->pos = dt_next_used(t, it->pos);
    if (it->pos >= t->cap) {
        it->table = NULL;
        Py_DECREF(t);
        return NULL;
    }
    Py_ssize_t i = it->pos++;
    if (it->kind == 1) return Py_NewRef(t->vals[i]);
    PyObject *key = PyLong_FromUnsignedLong(t->keys[i]);
    if (!key || it->kind == 0) return key;
    PyObject *pair = PyTuple_New(2);
    if (!pair) {
        Py_DECREF(key);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, key);
    PyTuple_SET_ITEM(pair, 1, Py_NewRef(t->vals[i]));
    return pair;
}

static int
DupTableIter_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((DupTableIterObject *)self)->table);
    return 0;
}

static int
DupTableIter_clear(PyObject *self)
{
    Py_CLEAR(((DupTableIterObject *)self)->table);
    return 0;
}

static void
DupTableIter_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((DupTableIterObject *)self)->table);
    PyObject_GC_Del(self);
}

static PyTypeObject DupTableIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.DupTableIterator",
    .tp_basicsize = sizeof(DupTableIterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = DupTableIter_dealloc,
    .tp_traverse = DupTableIter_traverse,
    .tp_clear = DupTableIter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = DupTableIter_next,
};

static PyMethodDef DupTable_methods[] = {
    {"get", (PyCFunction)(void (*)(void))DupTable_get, METH_FASTCALL, DupTable_get_doc},
    {"join", (PyCFunction)(void (*)(void))DupTable_join, METH_FASTCALL, DupTable_join_doc},
    {"leave", (PyCFunction)(void (*)(void))DupTable_leave, METH_FASTCALL, DupTable_leave_doc},
    {"reserve", DupTable_reserve, METH_O, DupTable_reserve_doc},
    {"keys", DupTable_keys, METH_NOARGS, "keys() -> iterator of the keys, in slot order."},
    {"values", DupTable_values, METH_NOARGS, "values() -> iterator of the values, in slot order."},
    {"items", DupTable_items, METH_NOARGS, "items() -> iterator of (key, value), in slot order."},
    {"_check", DupTable_check, METH_NOARGS, DupTable_check_doc},
    {"__sizeof__", DupTable_sizeof, METH_NOARGS, "The table's size in bytes, its arrays too."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods DupTable_as_mapping = {
    .mp_length = DupTable_len,
    .mp_subscript = DupTable_subscript,
    .mp_ass_subscript = DupTable_ass_subscript,
};

static PySequenceMethods DupTable_as_sequence = {
    .sq_contains = DupTable_contains,
};

PyDoc_STRVAR(DupTable_doc,
"DupTable()\n\n"
"MemoryState._dups (state._DUP_TABLE): a mapping of 30-bit int keys (ints in\n"
"[0, 2**30); other keys are absent for reads and refused for writes: TypeError,\n"
"ValueError) to objects, in an open-addressing table of 12 bytes a slot at a load of\n"
"0.5-0.7. get / [] / in / del / len / iteration as a dict's, O(1) expected, except\n"
"that iteration is in slot order (not insertion order) and raises RuntimeError when a\n"
"key came or went since it began; join and leave are the state's group steps.");

static PyTypeObject DupTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.DupTable",
    .tp_basicsize = sizeof(DupTableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = DupTable_doc,
    .tp_new = DupTable_new,
    .tp_dealloc = DupTable_dealloc,
    .tp_traverse = DupTable_traverse,
    .tp_clear = DupTable_tp_clear,
    .tp_iter = DupTable_iter,
    .tp_methods = DupTable_methods,
    .tp_as_mapping = &DupTable_as_mapping,
    .tp_as_sequence = &DupTable_as_sequence,
    .tp_hash = PyObject_HashNotImplemented,
};

/* Add the two types to module m: 0, or -1 with an exception. */
static int
dt_module_add(PyObject *m)
{
    if (PyType_Ready(&DupTable_Type) < 0 || PyType_Ready(&DupTableIter_Type) < 0) return -1;
    return PyModule_AddObjectRef(m, "DupTable", (PyObject *)&DupTable_Type);
}
