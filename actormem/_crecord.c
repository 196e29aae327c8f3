/* The compiled record: actormem._record.Record with its four ints as C int64 fields.
 *
 * A Python record (`__slots__`, a GC-tracked object of seven references: 96 bytes) also
 * held two ints of its own at 1M entries: its `slot` number and its `born` version (32
 * bytes each; `seq` shared the latter). This type keeps `born`, `died`, `seq` and `slot`
 * as int64 fields (read-only member descriptors of T_LONGLONG, whose offsets the C
 * cores read them at; a write goes through tp_setattro, checked), `cols` and `access` as object slots, and the eviction key's float
 * in place of the `(key, rec)` tuple: `evkey` reads back as a new `(key, rec)` (equal to
 * the one the owner put in its eviction order, which holds the record, not the reverse).
 *
 * No reference cycle goes through such a record (it refers to its entry store and its
 * access chain, neither of which refers to a record), so the type is not part of the
 * cyclic collector: no GC header, 80 bytes a record. A store or access object that
 * referred back to its record would be a cycle the collector cannot see; the engine
 * makes none (the docs of `cols` and `access` say so).
 *
 * The methods written in Python (`entry`, the access readers, `__repr__`) are set on the
 * type by actormem._record (a heap type, so it takes them); this file has the storage,
 * the constructor, `on_slot`, `visible`, `evkey`, `purged` and the order by `seq`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    int64_t born, died, seq, slot;
    PyObject *cols;   /* the entry store (never NULL once made) */
    PyObject *access; /* the newest Access, or None */
    double evkey;     /* the eviction key's float when evstate is EV_KEY */
    int evstate;      /* EV_NONE, EV_KEY, EV_PURGED (0: tp_alloc's zeroes read as None) */
} RecordObject;

enum { EV_NONE = 0, EV_KEY = 1, EV_PURGED = 2 };

/* Module state kept in statics: one interpreter (the package's modules are not
 * subinterpreter-safe). */
static PyTypeObject *Record_Type; /* the heap type (a strong reference) */
static PyObject *purged_key;      /* (0.0, None): evkey of a purged record */
static PyObject *loose_store;     /* the store of Record(entry, born, seq) without one */
static PyObject *s_put;
static PyObject *s_fields[4]; /* "born", "died", "seq", "slot" (interned) */
static PyObject *s_descrs[4]; /* Record's member descriptors of those four (strong) */

/* An int argument as int64: TypeError for a non-int (bool too), OverflowError outside
 * int64. 0, or -1 with the error set. */
static int
as_i64(PyObject *v, const char *what, int64_t *out)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        PyErr_Format(PyExc_TypeError, "Record: %s must be an int, not %.100s", what,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "Record: %s out of the int64 range", what);
        }
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

static PyObject *
rec_make(PyTypeObject *type, PyObject *cols, int64_t slot, int64_t born, int64_t seq)
{
    RecordObject *r = (RecordObject *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->cols = Py_NewRef(cols);
    r->slot = slot;
    r->born = born;
    r->died = PY_SSIZE_T_MAX; /* NEVER (sys.maxsize, which is this on every build) */
    r->seq = seq;
    r->access = Py_NewRef(Py_None);
    return (PyObject *)r;
}

/* Record(entry, born, seq, cols=None): the entry put in cols (the loose store for None);
 * born and seq checked before the put (nothing changed on a refusal). */
static PyObject *
Record_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"entry", "born", "seq", "cols", NULL};
    PyObject *entry, *born, *seq, *cols = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O:Record", kwlist, &entry, &born, &seq,
                                     &cols))
        return NULL;
    int64_t b, s, n;
    if (as_i64(born, "born", &b) < 0 || as_i64(seq, "seq", &s) < 0) return NULL;
    if (cols == Py_None) {
        if (!loose_store) {
            PyErr_SetString(PyExc_RuntimeError, "Record: no loose store set");
            return NULL;
        }
        cols = loose_store;
    }
    Py_INCREF(cols); /* held across put: it may run code that rebinds the loose store */
    PyObject *num = PyObject_CallMethodOneArg(cols, s_put, entry);
    if (!num) {
        Py_DECREF(cols);
        return NULL;
    }
    int bad = !PyLong_CheckExact(num);
    long long v = bad ? -1 : PyLong_AsLongLong(num);
    Py_DECREF(num);
    if (bad || v < 0) {
        Py_DECREF(cols);
        if (!bad && PyErr_Occurred()) return NULL; /* (the store released nothing) */
        PyErr_SetString(PyExc_TypeError, "Record: the store's put gave no slot number");
        return NULL;
    }
    n = (int64_t)v;
    PyObject *rec = rec_make(type, cols, n, b, s);
    Py_DECREF(cols);
    return rec;
}

static PyObject *
Record_on_slot(PyObject *cls, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"cols", "slot", "born", "seq", NULL};
    PyObject *c, *slot, *born, *seq;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:on_slot", kwlist, &c, &slot, &born, &seq))
        return NULL;
    int64_t n, b, s;
    if (as_i64(slot, "slot", &n) < 0 || as_i64(born, "born", &b) < 0 ||
        as_i64(seq, "seq", &s) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "Record.on_slot: slot must be >= 0");
        return NULL;
    }
    if (c == Py_None) {
        PyErr_SetString(PyExc_TypeError, "Record.on_slot: cols must be an entry store");
        return NULL;
    }
    return rec_make((PyTypeObject *)cls, c, n, b, s);
}

static void
Record_dealloc(PyObject *self)
{
    RecordObject *r = (RecordObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(r->cols);
    Py_CLEAR(r->access);
    tp->tp_free(self);
    Py_DECREF(tp); /* a heap type's instances hold their type */
}

/* Setting born/died/seq/slot: checked as the constructor checks (the member
 * descriptors are read-only: structmember's int64 setter stores -1 before it raises);
 * the other attributes as usual. Nothing changed on a refusal. */
static int
Record_setattro(PyObject *self, PyObject *name, PyObject *v)
{
    int i = 0;
    for (; i < 4 && name != s_fields[i]; i++) {}
    if (i == 4 && PyUnicode_Check(name) && !PyUnicode_CHECK_INTERNED(name)) {
        for (i = 0; i < 4 && PyUnicode_Compare(name, s_fields[i]) != 0; i++) {}
        if (PyErr_Occurred()) return -1;
    }
    if (i == 4) return PyObject_GenericSetAttr(self, name, v);
    /* A subclass that puts another attribute of that name in front of the field (a
     * property, a slot of its own) has it set as Python sets it: the field is written
     * here only where Record's own descriptor is the one an attribute read finds. */
    if (Py_TYPE(self) != Record_Type && _PyType_Lookup(Py_TYPE(self), name) != s_descrs[i])
        return PyObject_GenericSetAttr(self, name, v);
    const char *what = PyUnicode_AsUTF8(s_fields[i]);
    if (!v) {
        PyErr_Format(PyExc_TypeError, "Record.%s cannot be deleted", what);
        return -1;
    }
    int64_t x;
    if (as_i64(v, what, &x) < 0) return -1;
    RecordObject *r = (RecordObject *)self;
    int64_t *f[4] = {&r->born, &r->died, &r->seq, &r->slot};
    *f[i] = x;
    return 0;
}

/* The order by seq; against an int (the relevance order's keys, where a relevance-1.0
 * record is its own key: state._relevance_key_rec) as its seq would compare, an int
 * outside int64 above or below every record. == and != by identity (an int is never
 * equal to a record). */
static PyObject *
Record_richcompare(PyObject *a, PyObject *b, int op)
{
    if (op == Py_EQ || op == Py_NE) Py_RETURN_NOTIMPLEMENTED; /* == and != by identity */
    int ra = PyObject_TypeCheck(a, Record_Type), rb = PyObject_TypeCheck(b, Record_Type);
    int64_t x, y;
    if (ra && rb) {
        x = ((RecordObject *)a)->seq;
        y = ((RecordObject *)b)->seq;
    } else if ((ra && PyLong_Check(b) && !PyBool_Check(b)) ||
               (rb && PyLong_Check(a) && !PyBool_Check(a))) {
        PyObject *n = ra ? b : a;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
        if (v == -1 && !overflow && PyErr_Occurred()) return NULL;
        int64_t s = ((RecordObject *)(ra ? a : b))->seq;
        if (overflow) { /* past int64: above (or below) every seq */
            x = ra ? 0 : (overflow > 0 ? 1 : -1);
            y = ra ? (overflow > 0 ? 1 : -1) : 0;
        } else {
            x = ra ? s : (int64_t)v;
            y = ra ? (int64_t)v : s;
        }
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_RETURN_RICHCOMPARE(x, y, op);
}

static Py_hash_t
Record_hash(PyObject *self)
{
    return _Py_HashPointer(self); /* object's: records are keys by identity */
}

static PyObject *
Record_get_evkey(PyObject *self, void *closure)
{
    RecordObject *r = (RecordObject *)self;
    if (r->evstate == EV_PURGED) return Py_NewRef(purged_key);
    if (r->evstate != EV_KEY) Py_RETURN_NONE;
    PyObject *k = PyFloat_FromDouble(r->evkey);
    if (!k) return NULL;
    PyObject *t = PyTuple_Pack(2, k, self);
    Py_DECREF(k);
    return t;
}

static int
Record_set_evkey(PyObject *self, PyObject *v, void *closure)
{
    RecordObject *r = (RecordObject *)self;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "Record.evkey cannot be deleted");
        return -1;
    }
    if (v == Py_None) {
        r->evstate = EV_NONE;
        return 0;
    }
    if (v == purged_key) {
        r->evstate = EV_PURGED;
        return 0;
    }
    if (!PyTuple_CheckExact(v) || PyTuple_GET_SIZE(v) != 2 || PyTuple_GET_ITEM(v, 1) != self ||
        !PyFloat_CheckExact(PyTuple_GET_ITEM(v, 0))) {
        PyErr_SetString(PyExc_TypeError,
                        "Record.evkey takes None or (float, the record itself)");
        return -1;
    }
    r->evkey = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(v, 0));
    r->evstate = EV_KEY;
    return 0;
}

static PyObject *
Record_get_purged(PyObject *self, void *closure)
{
    return PyBool_FromLong(((RecordObject *)self)->evstate == EV_PURGED);
}

static int
Record_set_purged(PyObject *self, PyObject *v, void *closure)
{
    RecordObject *r = (RecordObject *)self;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "Record.purged cannot be deleted");
        return -1;
    }
    int t = PyObject_IsTrue(v);
    if (t < 0) return -1;
    if (t) r->evstate = EV_PURGED;
    else if (r->evstate == EV_PURGED) r->evstate = EV_NONE;
    return 0;
}

/* visible(version): born <= version < died. An int beyond int64 compares as an int
 * would (above every died: not visible; below every born: not visible); another type
 * by the rich comparisons of the fields' ints, as the Python class does. O(1). */
static PyObject *
Record_visible(PyObject *self, PyObject *version)
{
    RecordObject *r = (RecordObject *)self;
    if (PyLong_Check(version)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(version, &overflow);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (overflow) Py_RETURN_FALSE;
        return PyBool_FromLong(r->born <= v && v < r->died);
    }
    PyObject *b = PyLong_FromLongLong(r->born), *d = b ? PyLong_FromLongLong(r->died) : NULL;
    if (!d) {
        Py_XDECREF(b);
        return NULL;
    }
    int ok = PyObject_RichCompareBool(b, version, Py_LE);
    if (ok > 0) ok = PyObject_RichCompareBool(version, d, Py_LT);
    Py_DECREF(b);
    Py_DECREF(d);
    if (ok < 0) return NULL;
    return PyBool_FromLong(ok);
}

static PyObject *
Record_reduce(PyObject *self, PyObject *unused)
{
    PyErr_SetString(PyExc_TypeError,
                    "Record objects are not picklable (a version inside one state)");
    return NULL;
}

static PyMemberDef Record_members[] = {
    {"born", T_LONGLONG, offsetof(RecordObject, born), READONLY,
     "Version that made this record visible (an int64)."},
    {"died", T_LONGLONG, offsetof(RecordObject, died), READONLY,
     "Version that removed it, or NEVER (sys.maxsize)."},
    {"seq", T_LONGLONG, offsetof(RecordObject, seq), READONLY,
     "Insertion order of the entry's id (kept across upserts)."},
    {"slot", T_LONGLONG, offsetof(RecordObject, slot), READONLY,
     "The entry's slot number in cols."},
    {"cols", T_OBJECT_EX, offsetof(RecordObject, cols), 0,
     "The state's entry store (it must not refer back to the record)."},
    {"access", T_OBJECT_EX, offsetof(RecordObject, access), 0,
     "Newest Access version, or None (it must not refer back to the record)."},
    {NULL},
};

static PyGetSetDef Record_getset[] = {
    {"evkey", Record_get_evkey, Record_set_evkey,
     "Owner-private: (key, record) in the eviction order, None, or the purged marker.", NULL},
    {"purged", Record_get_purged, Record_set_purged,
     "True once the owner dropped the record from every structure. O(1).", NULL},
    {NULL},
};

static PyMethodDef Record_methods[] = {
    {"on_slot", (PyCFunction)(void (*)(void))Record_on_slot,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "on_slot(cols, slot, born, seq) -> Record: a record of the entry already in cols at "
     "slot. TypeError / OverflowError / ValueError for bad numbers. O(1)."},
    {"visible", Record_visible, METH_O,
     "visible(version) -> bool: whether this record is visible at version "
     "(born <= version < died). O(1)."},
    {"__reduce__", Record_reduce, METH_NOARGS, "Records are not picklable: TypeError."},
    {NULL},
};

static PyType_Slot Record_slots[] = {
    {Py_tp_new, Record_new},
    {Py_tp_dealloc, Record_dealloc},
    {Py_tp_richcompare, Record_richcompare},
    {Py_tp_setattro, Record_setattro},
    {Py_tp_hash, Record_hash},
    {Py_tp_members, Record_members},
    {Py_tp_getset, Record_getset},
    {Py_tp_methods, Record_methods},
    {Py_tp_doc, "One version of one entry (the compiled layout; see actormem._record)."},
    {0, NULL},
};

static PyType_Spec Record_spec = {
    "actormem._record.Record",
    sizeof(RecordObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, /* no GC (see the top); mutable (methods set) */
    Record_slots,
};

PyDoc_STRVAR(set_loose_doc,
"set_loose(cols)\n\n"
"Make cols the store of Record(entry, born, seq) made without one. O(1).");

static PyObject *
set_loose(PyObject *mod, PyObject *cols)
{
    Py_XSETREF(loose_store, Py_NewRef(cols));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_loose", set_loose, METH_O, set_loose_doc},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "actormem._crecord",
    "The compiled record type (int64 version and slot fields, no GC header).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__crecord(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (!s_put && !(s_put = PyUnicode_InternFromString("put"))) goto fail;
    static const char *const fields[4] = {"born", "died", "seq", "slot"};
    for (int i = 0; i < 4; i++) {
        if (!s_fields[i] && !(s_fields[i] = PyUnicode_InternFromString(fields[i]))) goto fail;
    }
    if (!purged_key && !(purged_key = Py_BuildValue("(dO)", 0.0, Py_None))) goto fail;
    if (!Record_Type && !(Record_Type = (PyTypeObject *)PyType_FromSpec(&Record_spec)))
        goto fail;
    for (int i = 0; i < 4; i++) {
        if (s_descrs[i]) continue;
        /* (a member descriptor read from its class is the descriptor itself) */
        if (!(s_descrs[i] = PyObject_GetAttr((PyObject *)Record_Type, s_fields[i]))) goto fail;
    }
    if (PyModule_AddObjectRef(m, "Record", (PyObject *)Record_Type) < 0 ||
        PyModule_AddObjectRef(m, "PURGED", purged_key) < 0 ||
        PyModule_AddIntConstant(m, "SIZE", (long)sizeof(RecordObject)) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
