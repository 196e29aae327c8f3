/* IdTable: MemoryState._by_id as an open-addressing table (included by _cwordoverlap.c).
 *
 * The state maps each id (the UUID's int, `entry._id`) to the newest record of that id.
 * A dict spends a ~42 B slot (at 1M) on each id; the key int is the entry's own, so it
 * costs nothing. This table keeps no key at all: a slot is a 32-bit tag of the key's hash
 * beside a reference to the record, and the key is read back from the record
 * (`rec.entry._id`, two slot reads at offsets fixed when the table is made) when a tag
 * matches: 12 B a slot, at a load between 0.5 and 0.7 (17-24 B an id).
 *
 * Layout: two arrays of `cap` slots, `tags` and `vals` (a strong reference where an id is
 * stored, NULL where free). The probes, growth and backward-shift delete are _oatable.h's
 * (shared with DupTable and GroupTable), with the tag in the key's place and "free" read
 * from the reference: an id's home slot is its tag's mixed bits scaled to cap, linear
 * probing, no tombstones, a load between 0.5 and 0.7 (below 1/8 the table shrinks).
 *
 * Python sees a mapping of exact int keys (others, int subclasses too, are absent for reads and refused for writes:
 * TypeError) to records of one class whose entry (of one class) has that key as its id:
 * a write of a value that is not such a record, or whose id is not the key, is a
 * TypeError / ValueError before any change. Iteration is in slot order (not insertion
 * order) and raises RuntimeError once an id came or went since it began. It takes part
 * in the cycle collector as a dict does. C callers (store_inserts) use it_lookup,
 * it_reserve and it_put.
 */

typedef struct {
    PyObject_HEAD
    Py_ssize_t cap;        /* slots (0: no arrays yet) */
    Py_ssize_t used;       /* ids stored */
    uint32_t *tags;        /* cap tags (meaningless where vals[i] is NULL) */
    PyObject **vals;       /* cap strong references to records, NULL where free */
    uint64_t changes;      /* bumped when an id comes or goes or slots move */
    PyTypeObject *rec_type;   /* the records' class (a strong reference) */
    PyTypeObject *entry_type; /* the entries' class (a strong reference); EntryColumns
                               * in the store's layout */
    Py_ssize_t entry_off;  /* the record's `entry` slot; its `cols` in the store's layout */
    Py_ssize_t id_off;     /* the entry's `_id` slot; the record's `slot` in the store's */
    int cols;              /* the store's layout (issue #20 item 6, step A): the key is
                            * the id in the record's slot of its EntryColumns */
    int slot_i64;          /* the record's `slot` is an int64 field (the compiled Record) */
} IdTableObject;

static PyTypeObject IdTable_Type;
static PyTypeObject IdTableIter_Type;

#define IT_SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* The store's layout: the slot of rec's entry in its EntryColumns, or NULL when the
 * record has no store of that class or no live slot (a record changed behind the table's
 * back, or purged: no key, found by nothing; _check reports it). */
static inline const EcSlot *
it_ec_slot(const IdTableObject *t, PyObject *rec)
{
    PyObject *c = IT_SLOT(rec, t->entry_off);
    if (!c || !Py_IS_TYPE(c, t->entry_type)) return NULL;
    return ec_rec_slot((const EntryColumnsObject *)c, rec, t->id_off, t->slot_i64);
}

/* An int key's 128 bits (1), or 0 when it has no such bits (negative or wider: equal to
 * no stored id). No exception. */
static inline int
it_key_bits(PyObject *key, uint64_t *hi, uint64_t *lo)
{
    unsigned char raw[16];
    if (_PyLong_Sign(key) < 0 || _PyLong_NumBits(key) > 128) {
        PyErr_Clear();
        return 0;
    }
    if (long_to_unsigned_bytes(key, raw, 16, 1) < 0) {
        PyErr_Clear();
        return 0;
    }
    memcpy(lo, raw, 8);
    memcpy(hi, raw + 8, 8);
    return 1;
}

/* The key of a stored record as a new reference, or NULL: with an exception set on an
 * error, without one when its entry or id is not there. */
static inline PyObject *
it_key_new(const IdTableObject *t, PyObject *rec)
{
    if (t->cols) {
        const EcSlot *e = it_ec_slot(t, rec);
        return e ? ec_id_obj(e) : NULL;
    }
    PyObject *e = IT_SLOT(rec, t->entry_off);
    if (!e || !Py_IS_TYPE(e, t->entry_type)) return NULL;
    PyObject *k = IT_SLOT(e, t->id_off);
    return k && PyLong_CheckExact(k) ? Py_NewRef(k) : NULL;
}

/* The key a stored record has (borrowed), or NULL when its entry or id is not there (a
 * record changed behind the table's back: no key, found by nothing; _check reports it).
 * The entries' layout only. */
static inline PyObject *
it_key_of(const IdTableObject *t, PyObject *rec)
{
    PyObject *e = IT_SLOT(rec, t->entry_off);
    if (!e || !Py_IS_TYPE(e, t->entry_type)) return NULL;
    PyObject *k = IT_SLOT(e, t->id_off);
    return k && PyLong_CheckExact(k) ? k : NULL;
}

/* A key's tag from its hash (every hash bit moves it). */
static inline uint32_t
it_tag(Py_hash_t h)
{
    uint64_t x = (uint64_t)h;
    return (uint32_t)(x ^ (x >> 32));
}

#define OA_PREFIX it
#define OA_TABLE IdTableObject
#define OA_TAGS tags
#define OA_VALS vals
#define OA_VAL PyObject *
#define OA_TAG_FREE 0
#define OA_VAL_FREE NULL
#define OA_IS_FREE(tags, vals, i) (!(vals)[i])
#include "_oatable.h"

/* The tag of int key (a PyLong), or -1 with an exception. Hashing an int runs no code. */
static inline int
it_tag_of(PyObject *key, uint32_t *tag)
{
    Py_hash_t h = PyObject_Hash(key);
    if (h == -1 && PyErr_Occurred()) return -1;
    *tag = it_tag(h);
    return 0;
}

/* The slot holding int key (tag its tag), -1 when absent, -2 with an exception. Comparing
 * two ints runs no code, so the table cannot change meanwhile. */
static Py_ssize_t
it_find(const IdTableObject *t, PyObject *key, uint32_t tag)
{
    Py_ssize_t cap = t->cap;
    if (cap == 0) return -1;
    const uint32_t *tags = t->tags;
    PyObject *const *vals = t->vals;
    Py_ssize_t i = oa_home(tag, cap);
    if (t->cols) {
        uint64_t hi, lo;
        if (!it_key_bits(key, &hi, &lo)) return -1;
        for (;;) {
            PyObject *v = vals[i];
            if (!v) return -1;
            if (tags[i] == tag) {
                const EcSlot *e = it_ec_slot(t, v);
                if (e && e->id_lo == lo && e->id_hi == hi) return i;
            }
            if (++i == cap) i = 0;
        }
    }
    for (;;) {
        PyObject *v = vals[i];
        if (!v) return -1;
        if (tags[i] == tag) {
            PyObject *k = it_key_of(t, v);
            if (k == key) return i;
            if (k) {
                int eq = PyObject_RichCompareBool(k, key, Py_EQ);
                if (eq < 0) return -2;
                if (eq) return i;
            }
        }
        if (++i == cap) i = 0;
    }
}

/* The slot holding the id of 128 bits (hi, lo) in a table of the store's layout
 * (t->cols; tag the tag of the id's int's hash), or -1 when absent. Runs no code. */
static Py_ssize_t
it_find_bits(const IdTableObject *t, uint64_t hi, uint64_t lo, uint32_t tag)
{
    Py_ssize_t cap = t->cap;
    if (cap == 0) return -1;
    Py_ssize_t i = oa_home(tag, cap);
    for (;;) {
        PyObject *v = t->vals[i];
        if (!v) return -1;
        if (t->tags[i] == tag) {
            const EcSlot *e = it_ec_slot(t, v);
            if (e && e->id_lo == lo && e->id_hi == hi) return i;
        }
        if (++i == cap) i = 0;
    }
}

/* The record stored under int key (borrowed), NULL when absent (no exception) or on an
 * error (an exception set). */
static PyObject *
it_lookup(const IdTableObject *t, PyObject *key)
{
    uint32_t tag;
    if (it_tag_of(key, &tag) < 0) return NULL;
    Py_ssize_t i = it_find(t, key, tag);
    return i >= 0 ? t->vals[i] : NULL;
}

/* 0 when rec may be stored under key (a record of the table's class whose entry's id
 * equals key), else -1 with TypeError / ValueError. */
static int
it_check_value(const IdTableObject *t, PyObject *key, PyObject *rec)
{
    if (!PyLong_CheckExact(key)) {
        PyErr_Format(PyExc_TypeError, "IdTable keys are ints, not %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    if (!Py_IS_TYPE(rec, t->rec_type)) {
        PyErr_Format(PyExc_TypeError, "IdTable values are %.100s records, not %.100s",
                     t->rec_type->tp_name, Py_TYPE(rec)->tp_name);
        return -1;
    }
    if (t->cols) {
        const EcSlot *e = it_ec_slot(t, rec);
        uint64_t hi, lo;
        if (!e) {
            PyErr_SetString(PyExc_TypeError, "IdTable: the record has no live slot in a store");
            return -1;
        }
        if (!it_key_bits(key, &hi, &lo) || e->id_lo != lo || e->id_hi != hi) {
            PyErr_SetString(PyExc_ValueError, "IdTable: the key is not the record's id");
            return -1;
        }
        return 0;
    }
    PyObject *k = it_key_of(t, rec);
    if (!k) {
        PyErr_SetString(PyExc_TypeError, "IdTable: the record has no entry with an int id");
        return -1;
    }
    int eq = k == key ? 1 : PyObject_RichCompareBool(k, key, Py_EQ);
    if (eq < 0) return -1;
    if (!eq) {
        PyErr_SetString(PyExc_ValueError, "IdTable: the key is not the record's id");
        return -1;
    }
    return 0;
}

/* table[key] = rec (checked by it_check_value; a new reference taken). 0 or -1
 * (MemoryError, nothing changed). */
static int
it_put(IdTableObject *t, PyObject *key, PyObject *rec)
{
    uint32_t tag;
    if (it_tag_of(key, &tag) < 0) return -1;
    Py_ssize_t i = it_find(t, key, tag);
    if (i == -2) return -1;
    if (i >= 0) {
        PyObject *old = t->vals[i];
        t->vals[i] = Py_NewRef(rec);
        Py_DECREF(old); /* last: the table is whole if this runs code */
        return 0;
    }
    if (it_reserve(t, 1) < 0) return -1;
    it_place(t->tags, t->vals, t->cap, tag, Py_NewRef(rec));
    t->used++;
    t->changes++;
    return 0;
}

/* Free slot i (holding an id) and return its reference (the caller's to release once it
 * is done with the table): the run after it shifts back over the hole. */
static PyObject *
it_take(IdTableObject *t, Py_ssize_t i)
{
    PyObject *old = t->vals[i];
    it_free_slot(t, i);
    return old;
}

/* The member descriptor's slot offset (an object slot of a plain class), or -1 with
 * TypeError; *type is its class (borrowed). */
static Py_ssize_t
it_descr_offset(PyObject *descr, PyTypeObject **type, int *i64)
{
    *i64 = 0;
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "IdTable() takes two slot descriptors");
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    PyTypeObject *tp = ((PyDescrObject *)descr)->d_type;
    if (m->type == T_LONGLONG && !(m->flags & READ_RESTRICTED) && m->offset > 0 &&
        tp->tp_itemsize == 0 &&
        (size_t)m->offset + sizeof(int64_t) <= (size_t)tp->tp_basicsize) {
        *i64 = 1; /* the compiled Record's slot number */
        *type = tp;
        return m->offset;
    }
    if (m->type != T_OBJECT_EX || (m->flags & READ_RESTRICTED) || m->offset <= 0 ||
        tp->tp_itemsize != 0 || (size_t)m->offset + sizeof(PyObject *) > (size_t)tp->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "IdTable(): an object slot of a plain class expected");
        return -1;
    }
    *type = tp;
    return m->offset;
}

static PyObject *
IdTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 2 || (kwds && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "IdTable(entry_slot, id_slot) takes 2 positional arguments");
        return NULL;
    }
    PyTypeObject *rt, *et;
    int ei64, ii64;
    Py_ssize_t eoff = it_descr_offset(PyTuple_GET_ITEM(args, 0), &rt, &ei64);
    if (eoff < 0) return NULL;
    Py_ssize_t ioff = it_descr_offset(PyTuple_GET_ITEM(args, 1), &et, &ii64);
    if (ioff < 0) return NULL;
    int cols = et == rt; /* (Record.cols, Record.slot): the store's layout */
    if (ei64 || (ii64 && !cols)) {
        PyErr_SetString(PyExc_TypeError, "IdTable(): an object slot of a plain class expected");
        return NULL;
    }
    if (cols && eoff == ioff) {
        PyErr_SetString(PyExc_TypeError, "IdTable(): two different slots of the records");
        return NULL;
    }
    if (cols) et = &EntryColumns_Type;
    IdTableObject *t = (IdTableObject *)type->tp_alloc(type, 0);
    if (!t) return NULL;
    t->cap = t->used = 0;
    t->tags = NULL;
    t->vals = NULL;
    t->changes = 0;
    t->rec_type = (PyTypeObject *)Py_NewRef((PyObject *)rt);
    t->entry_type = (PyTypeObject *)Py_NewRef((PyObject *)et);
    t->entry_off = eoff;
    t->id_off = ioff;
    t->cols = cols;
    t->slot_i64 = ii64;
    return (PyObject *)t;
}

/* Release every reference and the arrays (the table empty first: a release may run code
 * that reads it). The classes stay (a table in use is whole). */
static int
IdTable_clear_impl(IdTableObject *t)
{
    uint32_t *tags = t->tags;
    PyObject **vals = t->vals;
    Py_ssize_t cap = t->cap;
    t->tags = NULL;
    t->vals = NULL;
    t->cap = t->used = 0;
    t->changes++;
    for (Py_ssize_t i = 0; i < cap; i++) Py_XDECREF(vals[i]);
    PyMem_Free(tags);
    PyMem_Free(vals);
    return 0;
}

static int
IdTable_tp_clear(PyObject *self)
{
    return IdTable_clear_impl((IdTableObject *)self);
}

static int
IdTable_traverse(PyObject *self, visitproc visit, void *arg)
{
    IdTableObject *t = (IdTableObject *)self;
    for (Py_ssize_t i = 0; i < t->cap; i++) Py_VISIT(t->vals[i]);
    Py_VISIT((PyObject *)t->rec_type);
    Py_VISIT((PyObject *)t->entry_type);
    return 0;
}

static void
IdTable_dealloc(PyObject *self)
{
    IdTableObject *t = (IdTableObject *)self;
    PyObject_GC_UnTrack(self);
    IdTable_clear_impl(t);
    Py_CLEAR(t->rec_type);
    Py_CLEAR(t->entry_type);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t
IdTable_len(PyObject *self)
{
    return ((IdTableObject *)self)->used;
}

/* The slot of key (any object: a non-int is absent), -1 absent, -2 an error. */
static Py_ssize_t
it_find_any(IdTableObject *t, PyObject *key)
{
    if (!PyLong_CheckExact(key)) return -1; /* an int subclass's __eq__ could run code */
    uint32_t tag;
    if (it_tag_of(key, &tag) < 0) return -2;
    return it_find(t, key, tag);
}

static PyObject *
IdTable_subscript(PyObject *self, PyObject *key)
{
    IdTableObject *t = (IdTableObject *)self;
    Py_ssize_t i = it_find_any(t, key);
    if (i == -2) return NULL;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return Py_NewRef(t->vals[i]);
}

static int
IdTable_ass_subscript(PyObject *self, PyObject *key, PyObject *val)
{
    IdTableObject *t = (IdTableObject *)self;
    if (val) {
        if (it_check_value(t, key, val) < 0) return -1;
        return it_put(t, key, val);
    }
    Py_ssize_t i = it_find_any(t, key);
    if (i == -2) return -1;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    Py_DECREF(it_take(t, i));
    return 0;
}

static int
IdTable_contains(PyObject *self, PyObject *key)
{
    Py_ssize_t i = it_find_any((IdTableObject *)self, key);
    return i == -2 ? -1 : i >= 0;
}

PyDoc_STRVAR(IdTable_get_doc,
"get(key, default=None, /) -> object\n\n"
"table[key] if key is stored, else default (also for a key that is no int).\n"
"O(1) expected.");

static PyObject *
IdTable_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get() takes 1 or 2 arguments");
        return NULL;
    }
    IdTableObject *t = (IdTableObject *)self;
    Py_ssize_t i = it_find_any(t, args[0]);
    if (i == -2) return NULL;
    if (i >= 0) return Py_NewRef(t->vals[i]);
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

PyDoc_STRVAR(IdTable_reserve_doc,
"reserve(n, /) -> None\n\n"
"Room for n more ids without growing (a bulk load's one allocation, at a load of 0.7\n"
"once they are in). ValueError for n < 0. O(len(table) + n).");

static PyObject *
IdTable_reserve(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "reserve(): n < 0");
        return NULL;
    }
    if (it_reserve_to((IdTableObject *)self, n, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(IdTable_check_doc,
"_check() -> None\n\n"
"Assert the layout's invariants (AssertionError naming the first broken one): the\n"
"count, a free slot, every record of the table's class with an int id whose tag is\n"
"the slot's, stored once and reachable from its home without crossing a free slot.\n"
"O(capacity).");

static PyObject *
IdTable_check(PyObject *self, PyObject *unused)
{
    IdTableObject *t = (IdTableObject *)self;
    const char *bad = NULL;
    Py_ssize_t n = 0;
    if (t->cap == 0) {
        if (t->used != 0 || t->tags || t->vals) bad = "no arrays but ids";
    } else if (t->cap < OA_MIN_CAP || t->used * 10 > t->cap * 7) {
        bad = "capacity below 8 or load above 0.7";
    }
    for (Py_ssize_t i = 0; !bad && i < t->cap; i++) {
        PyObject *v = t->vals[i];
        if (!v) continue;
        n++;
        PyObject *k = Py_IS_TYPE(v, t->rec_type) ? it_key_new(t, v) : NULL;
        if (!k) {
            if (PyErr_Occurred()) return NULL;
            bad = "a value that is no record with an int id";
            break;
        }
        uint32_t tag;
        if (it_tag_of(k, &tag) < 0) {
            Py_DECREF(k);
            return NULL;
        }
        if (tag != t->tags[i]) {
            Py_DECREF(k);
            bad = "a tag that is not its id's";
            break;
        }
        Py_ssize_t at = it_find(t, k, tag);
        Py_DECREF(k);
        if (at == -2) return NULL;
        if (at != i) {
            bad = "an id twice, or not reachable from its home";
            break;
        }
        if (it_gap(t, tag, i)) {
            bad = "a free slot between an id and its home";
            break;
        }
    }
    if (!bad && n != t->used) bad = "the count is not the ids'";
    if (bad) {
        PyErr_SetString(PyExc_AssertionError, bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
IdTable_sizeof(PyObject *self, PyObject *unused)
{
    IdTableObject *t = (IdTableObject *)self;
    return PyLong_FromSsize_t((Py_ssize_t)Py_TYPE(self)->tp_basicsize +
                              t->cap * (Py_ssize_t)(sizeof(uint32_t) + sizeof(PyObject *)));
}

/* ---- iteration: keys, values or items in slot order */

typedef struct {
    PyObject_HEAD
    IdTableObject *table; /* NULL once exhausted */
    Py_ssize_t pos;
    uint64_t changes;
    int kind; /* 0 keys, 1 values, 2 items */
} IdTableIterObject;

static PyObject *
it_iter_new(PyObject *self, int kind)
{
    IdTableIterObject *it = PyObject_GC_New(IdTableIterObject, &IdTableIter_Type);
    if (!it) return NULL;
    it->table = (IdTableObject *)Py_NewRef(self);
    it->pos = 0;
    it->changes = ((IdTableObject *)self)->changes;
    it->kind = kind;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *
IdTable_iter(PyObject *self)
{
    return it_iter_new(self, 0);
}

static PyObject *
IdTable_keys(PyObject *self, PyObject *unused)
{
    return it_iter_new(self, 0);
}

static PyObject *
IdTable_values(PyObject *self, PyObject *unused)
{
    return it_iter_new(self, 1);
}

static PyObject *
IdTable_items(PyObject *self, PyObject *unused)
{
    return it_iter_new(self, 2);
}

static PyObject *
IdTableIter_next(PyObject *self)
{
    IdTableIterObject *it = (IdTableIterObject *)self;
    IdTableObject *t = it->table;
    if (!t) return NULL;
    if (t->changes != it->changes) {
        PyErr_SetString(PyExc_RuntimeError, "IdTable changed during iteration");
        return NULL;
    }
    it->pos = it_next_used(t, it->pos);
    if (it->pos >= t->cap) {
        it->table = NULL;
        Py_DECREF(t);
        return NULL;
    }
    Py_ssize_t i = it->pos++;
    PyObject *rec = t->vals[i];
    if (it->kind == 1) return Py_NewRef(rec);
    PyObject *key = it_key_new(t, rec);
    if (!key) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "IdTable: a record lost its entry's id");
        return NULL;
    }
    if (it->kind == 0) return key;
    /* Both references taken before the tuple's allocation: it may run the cycle
     * collector, whose finalizers may delete this id (the table's reference the last). */
    Py_INCREF(rec);
    PyObject *pair = PyTuple_New(2);
    if (!pair) {
        Py_DECREF(key);
        Py_DECREF(rec);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, key);
    PyTuple_SET_ITEM(pair, 1, rec);
    return pair;
}

static int
IdTableIter_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((IdTableIterObject *)self)->table);
    return 0;
}

static int
IdTableIter_clear(PyObject *self)
{
    Py_CLEAR(((IdTableIterObject *)self)->table);
    return 0;
}

static void
IdTableIter_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((IdTableIterObject *)self)->table);
    PyObject_GC_Del(self);
}

static PyTypeObject IdTableIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.IdTableIterator",
    .tp_basicsize = sizeof(IdTableIterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = IdTableIter_dealloc,
    .tp_traverse = IdTableIter_traverse,
    .tp_clear = IdTableIter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = IdTableIter_next,
};

static PyMethodDef IdTable_methods[] = {
    {"get", (PyCFunction)(void (*)(void))IdTable_get, METH_FASTCALL, IdTable_get_doc},
    {"reserve", IdTable_reserve, METH_O, IdTable_reserve_doc},
    {"keys", IdTable_keys, METH_NOARGS, "keys() -> iterator of the ids, in slot order."},
    {"values", IdTable_values, METH_NOARGS, "values() -> iterator of the records, in slot order."},
    {"items", IdTable_items, METH_NOARGS, "items() -> iterator of (id, record), in slot order."},
    {"_check", IdTable_check, METH_NOARGS, IdTable_check_doc},
    {"__sizeof__", IdTable_sizeof, METH_NOARGS, "The table's size in bytes, its arrays too."},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods IdTable_as_mapping = {
    .mp_length = IdTable_len,
    .mp_subscript = IdTable_subscript,
    .mp_ass_subscript = IdTable_ass_subscript,
};

static PySequenceMethods IdTable_as_sequence = {
    .sq_contains = IdTable_contains,
};

PyDoc_STRVAR(IdTable_doc,
"IdTable(entry_slot, id_slot)\n\n"
"MemoryState._by_id (state._ID_TABLE): a mapping of int ids to records, in an\n"
"open-addressing table of 12 bytes a slot (a 32-bit tag of the id's hash and the\n"
"reference) at a load of 0.5-0.7; the id is read back from the record:\n"
"getattr(getattr(rec, entry_slot's name), id_slot's name). entry_slot and id_slot are\n"
"the member descriptors (Record.entry, MemoryEntry._id): values must be records of\n"
"entry_slot's class whose entry is of id_slot's class, stored under their own id\n"
"(TypeError / ValueError before any change otherwise; keys that are no int are absent\n"
"for reads). get / [] / in / del / len / iteration as a dict's, O(1) expected, except\n"
"that iteration is in slot order (not insertion order) and raises RuntimeError once an\n"
"id came or went since it began.");

static PyTypeObject IdTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.IdTable",
    .tp_basicsize = sizeof(IdTableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = IdTable_doc,
    .tp_new = IdTable_new,
    .tp_dealloc = IdTable_dealloc,
    .tp_traverse = IdTable_traverse,
    .tp_clear = IdTable_tp_clear,
    .tp_iter = IdTable_iter,
    .tp_methods = IdTable_methods,
    .tp_as_mapping = &IdTable_as_mapping,
    .tp_as_sequence = &IdTable_as_sequence,
    .tp_hash = PyObject_HashNotImplemented,
};

/* Add the two types to module m: 0, or -1 with an exception. */
static int
it_module_add(PyObject *m)
{
    if (PyType_Ready(&IdTable_Type) < 0 || PyType_Ready(&IdTableIter_Type) < 0) return -1;
    return PyModule_AddObjectRef(m, "IdTable", (PyObject *)&IdTable_Type);
}
