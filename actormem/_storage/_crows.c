/* Reading a durable memory's rows in C (``sqlite_format.read_file``, ``_C_ROWS``).
 *
 * read_entries() opens its own read-only connection (the URI read_file's own uses),
 * steps through ``SELECT_ENTRIES`` and decodes every row straight from SQLite's column
 * values into (seq, MemoryEntry) pairs, with the checks of ``_decode_checked``: no
 * row tuple and no Python object for a column that becomes none (the id's text, the
 * category's, the times' texts, a tag set seen on the row before). The first row that is
 * not in the writer's own form (``_decode_checked`` would decline it, or raise), or any
 * SQLite error, makes it return None: the caller then reads the file as before, in
 * Python, which gives the same entries or the error with its message. Files written by
 * actormem have no such row.
 *
 * Built against the system's SQLite (``libraries=["sqlite3"]`` in setup.py, optional):
 * this module shares no SQLite object with Python's ``sqlite3`` (its own connection),
 * so the two libraries need not be the same build.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <sqlite3.h>
#include <string.h>

#include "../_index/_kernels_common.h"

#define ENTRY_FIELDS 15
#define COLUMNS 16
#define MAX_CATEGORIES 16
/* Rows read between two releases of the GIL (about a millisecond). */
#define YIELD_ROWS 512

typedef struct {
    PyTypeObject *type;
    Py_ssize_t off[ENTRY_FIELDS];
    /* categories: their values' UTF-8 and the enum members */
    int ncat;
    const char *cat_text[MAX_CATEGORIES];
    Py_ssize_t cat_len[MAX_CATEGORIES];
    PyObject *cat[MAX_CATEGORIES];
    PyObject *tags_of, *namespace_of, *json_object, *one;
    Py_ssize_t max_memory, max_key;
    double max_ttl;
    long long max_seq;
    /* whether each memory text's hash is computed (and cached in the str) as it is made */
    int hash_memory;
    /* the last tags / namespace text and what it converted to (borrowed from `hold`) */
    PyObject *last_tags_text, *last_tags, *last_ns_text, *last_ns;
} ctx_t;

/* A column's text as a str (strict UTF-8, as Python's sqlite3 makes it), or NULL
 * (declined, no error) when it is not TEXT or not UTF-8. */
static PyObject *
column_str(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) != SQLITE_TEXT) return NULL;
    const char *p = (const char *)sqlite3_column_text(st, i);
    int n = sqlite3_column_bytes(st, i);
    if (!p) return NULL;
    PyObject *s = PyUnicode_DecodeUTF8(p, n, "strict");
    if (!s && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return s;
}

/* The UTC datetime of a TEXT column in the writer's form, or NULL (declined). */
static PyObject *
column_utc(sqlite3_stmt *st, int i)
{
    int f[7];
    if (sqlite3_column_type(st, i) != SQLITE_TEXT) return NULL;
    const char *p = (const char *)sqlite3_column_text(st, i);
    if (!p || !utc_fields(p, sqlite3_column_bytes(st, i), f)) return NULL;
    PyObject *dt = PyDateTimeAPI->DateTime_FromDateAndTime(
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], PyDateTime_TimeZone_UTC,
        PyDateTimeAPI->DateTimeType);
    if (!dt && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return dt;
}

/* `f(text of column i)` through a one-entry cache of the last text; new reference, or
 * NULL (declined: not TEXT, not UTF-8, or f raised an Exception). */
static PyObject *
column_converted(sqlite3_stmt *st, int i, PyObject *f, PyObject **last_text, PyObject **last)
{
    if (sqlite3_column_type(st, i) != SQLITE_TEXT) return NULL;
    const char *p = (const char *)sqlite3_column_text(st, i);
    Py_ssize_t n = sqlite3_column_bytes(st, i);
    if (!p) return NULL;
    if (*last_text && PyBytes_GET_SIZE(*last_text) == n &&
        memcmp(PyBytes_AS_STRING(*last_text), p, (size_t)n) == 0)
        return Py_NewRef(*last);
    PyObject *s = PyUnicode_DecodeUTF8(p, n, "strict");
    if (!s) goto declined;
    PyObject *r = PyObject_CallOneArg(f, s);
    Py_DECREF(s);
    if (!r) goto declined;
    PyObject *raw = PyBytes_FromStringAndSize(p, n);
    if (!raw) {
        Py_DECREF(r);
        return NULL;
    }
    Py_XSETREF(*last_text, raw);
    Py_XSETREF(*last, Py_NewRef(r));
    return r;
declined:
    if (PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return NULL;
}

/* Whether a str has at most `limit` code points. (Strict UTF-8 leaves no surrogate.) */
static inline int
short_enough(PyObject *s, Py_ssize_t limit)
{
    return PyUnicode_GET_LENGTH(s) <= limit;
}

/* The row's (seq, entry), or NULL: declined (no error set) or an error to raise. */
static PyObject *
decode_row(sqlite3_stmt *st, ctx_t *c)
{
    PyObject *vals[ENTRY_FIELDS] = {NULL};
    PyObject *seq = NULL, *pair = NULL;
    if (sqlite3_column_count(st) != COLUMNS) return NULL;
    if (sqlite3_column_type(st, 0) != SQLITE_INTEGER) return NULL;
    long long s = sqlite3_column_int64(st, 0);
    if (s < 1 || s > c->max_seq) return NULL;
    /* id */
    if (sqlite3_column_type(st, 1) != SQLITE_TEXT) return NULL;
    const char *idp = (const char *)sqlite3_column_text(st, 1);
    char hex[33];
    if (!idp || !uuid_digits(idp, sqlite3_column_bytes(st, 1), hex)) return NULL;
    /* category */
    if (sqlite3_column_type(st, 2) != SQLITE_TEXT) return NULL;
    const char *catp = (const char *)sqlite3_column_text(st, 2);
    Py_ssize_t catn = sqlite3_column_bytes(st, 2);
    PyObject *cat = NULL;
    for (int i = 0; catp && i < c->ncat; i++) {
        if (c->cat_len[i] == catn && memcmp(c->cat_text[i], catp, (size_t)catn) == 0) {
            cat = c->cat[i];
            break;
        }
    }
    if (!cat) return NULL;
    /* relevance, access_count, validated, ttl */
    if (sqlite3_column_type(st, 7) != SQLITE_FLOAT) return NULL;
    double rel = sqlite3_column_double(st, 7);
    if (!(rel >= 0.0 && rel <= 1.0)) return NULL;
    if (sqlite3_column_type(st, 8) != SQLITE_INTEGER) return NULL;
    if (sqlite3_column_int64(st, 8) < 0) return NULL;
    if (sqlite3_column_type(st, 10) != SQLITE_INTEGER) return NULL;
    long long validated = sqlite3_column_int64(st, 10);
    if (validated != 0 && validated != 1) return NULL;
    int ttl_type = sqlite3_column_type(st, 14);
    double ttl = 0.0;
    if (ttl_type != SQLITE_NULL) {
        if (ttl_type != SQLITE_FLOAT) return NULL;
        ttl = sqlite3_column_double(st, 14);
        if (!(ttl > 0.0 && ttl <= c->max_ttl)) return NULL;
    }
    vals[0] = Py_NewRef(cat);
    if (!(vals[1] = column_str(st, 3)) || !short_enough(vals[1], c->max_memory)) goto fail;
    /* str's hash is cached in the object: computed now, while its bytes are in the
     * cache, the restore's dict of texts (group_texts) does not read them again */
    if (c->hash_memory && PyObject_Hash(vals[1]) == -1) goto fail;
    if (!(vals[2] = PyLong_FromString(hex, NULL, 16))) goto fail;
    if (!(vals[3] = column_converted(st, 4, c->tags_of, &c->last_tags_text, &c->last_tags)))
        goto fail;
    if (!(vals[4] = column_utc(st, 6))) goto fail;
    vals[5] = rel == 1.0 ? Py_NewRef(c->one) : PyFloat_FromDouble(rel);
    if (!vals[5]) goto fail;
    if (!(vals[6] = PyLong_FromLongLong(sqlite3_column_int64(st, 8)))) goto fail;
    vals[7] = Py_NewRef(validated ? Py_True : Py_False);
    if (!(vals[8] = column_converted(st, 5, c->namespace_of, &c->last_ns_text, &c->last_ns)))
        goto fail;
    if (sqlite3_column_type(st, 9) == SQLITE_NULL) vals[9] = Py_NewRef(Py_None);
    else if (!(vals[9] = column_utc(st, 9))) goto fail;
    if (sqlite3_column_type(st, 11) == SQLITE_NULL) vals[10] = Py_NewRef(Py_None);
    else if (!(vals[10] = column_str(st, 11)) || PyUnicode_GET_LENGTH(vals[10]) == 0 ||
             !short_enough(vals[10], c->max_key))
        goto fail;
    if (sqlite3_column_type(st, 12) == SQLITE_NULL) vals[11] = Py_NewRef(Py_None);
    else {
        PyObject *text = column_str(st, 12);
        if (!text) goto fail;
        vals[11] = PyObject_CallOneArg(c->json_object, text);
        Py_DECREF(text);
        if (!vals[11]) goto fail;
    }
    /* updated_at: the created_at object when NULL or the same text (as most rows) */
    int up_type = sqlite3_column_type(st, 13);
    if (up_type == SQLITE_NULL) vals[12] = Py_NewRef(vals[4]);
    else {
        if (up_type != SQLITE_TEXT) goto fail;
        const char *up = (const char *)sqlite3_column_text(st, 13);
        Py_ssize_t upn = sqlite3_column_bytes(st, 13);
        /* created_at's pointer may move once another column is read: read it again */
        const char *cr = (const char *)sqlite3_column_text(st, 6);
        Py_ssize_t crn = sqlite3_column_bytes(st, 6);
        if (up && cr && upn == crn && memcmp(up, cr, (size_t)upn) == 0)
            vals[12] = Py_NewRef(vals[4]);
        else {
            if (!(vals[12] = column_utc(st, 13))) goto fail;
            int lt = PyObject_RichCompareBool(vals[12], vals[4], Py_LT);
            if (lt < 0) goto fail;
            if (lt) Py_SETREF(vals[12], Py_NewRef(vals[4]));
        }
    }
    if (ttl_type == SQLITE_NULL) vals[13] = Py_NewRef(Py_None);
    else if (!(vals[13] = PyFloat_FromDouble(ttl))) goto fail;
    if (sqlite3_column_type(st, 15) == SQLITE_NULL) vals[14] = Py_NewRef(Py_None);
    else if (!(vals[14] = column_utc(st, 15))) goto fail;
    if (!(seq = PyLong_FromLongLong(s))) goto fail;
    PyObject *entry = c->type->tp_alloc(c->type, 0);
    if (!entry) goto fail;
    for (int i = 0; i < ENTRY_FIELDS; i++) {
        PyObject **slot = (PyObject **)((char *)entry + c->off[i]);
        Py_XSETREF(*slot, vals[i]); /* steals */
        vals[i] = NULL;
    }
    pair = PyTuple_Pack(2, seq, entry);
    Py_DECREF(entry);
    Py_DECREF(seq);
    return pair;
fail:
    for (int i = 0; i < ENTRY_FIELDS; i++) Py_XDECREF(vals[i]);
    Py_XDECREF(seq);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return NULL;
}

PyDoc_STRVAR(read_entries_doc,
"read_entries(uri, sql, entry_type, fields, categories, tags_of, namespace_of,\n"
"             json_object, one, max_memory, max_key, max_ttl, max_seq,\n"
"             hash_memory=False) -> list | None\n\n"
"Every row of `sql` (SELECT_ENTRIES, 16 columns) of the database at the read-only\n"
"`uri`, as (seq, entry) pairs in order, decoded as sqlite_format._decode_checked\n"
"decodes a fetched row; None at the first row it would decline or any SQLite error\n"
"(the caller then reads in Python). `categories` maps each category's value (str) to\n"
"its member; `fields` names entry_type's 15 slots in _entry._ENTRY_FIELDS' order.\n"
"`hash_memory` true: each entry's memory text has its hash computed (cached in the\n"
"str) as it is made, while its bytes are hot; the entries are the same either way.\n"
"Releases the GIL and runs the signal handlers every 512 rows (an exception a handler\n"
"raises, such as KeyboardInterrupt, is raised by this call). O(file size).");

static void
ctx_clear(ctx_t *c)
{
    Py_CLEAR(c->last_tags_text);
    Py_CLEAR(c->last_tags);
    Py_CLEAR(c->last_ns_text);
    Py_CLEAR(c->last_ns);
}

static PyObject *
read_entries(PyObject *self, PyObject *args)
{
    const char *uri, *sql;
    PyObject *fields, *categories;
    ctx_t c;
    memset(&c, 0, sizeof c);
    if (!PyArg_ParseTuple(args, "ssO!O!O!OOOO!nndL|p", &uri, &sql, &PyType_Type, &c.type,
                          &PyTuple_Type, &fields, &PyDict_Type, &categories, &c.tags_of,
                          &c.namespace_of, &c.json_object, &PyFloat_Type, &c.one,
                          &c.max_memory, &c.max_key, &c.max_ttl, &c.max_seq,
                          &c.hash_memory))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != ENTRY_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "read_entries: fields must name the entry's 15 slots");
        return NULL;
    }
    if (!(c.type->tp_flags & Py_TPFLAGS_HAVE_GC) || c.type->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "read_entries: entry_type is not a slots class");
        return NULL;
    }
    for (int i = 0; i < ENTRY_FIELDS; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name) || !(c.off[i] = slot_offset(c.type, name))) {
            PyErr_SetString(PyExc_TypeError,
                            "read_entries: entry_type has no object slot for a field");
            return NULL;
        }
    }
    if (!PyCallable_Check(c.tags_of) || !PyCallable_Check(c.namespace_of) ||
        !PyCallable_Check(c.json_object)) {
        PyErr_SetString(PyExc_TypeError, "read_entries: the converters must be callable");
        return NULL;
    }
    if (PyDict_GET_SIZE(categories) > MAX_CATEGORIES) {
        PyErr_SetString(PyExc_ValueError, "read_entries: too many categories");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(categories, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "read_entries: a category's value is not a str");
            return NULL;
        }
        Py_ssize_t n;
        const char *t = PyUnicode_AsUTF8AndSize(k, &n); /* kept by the dict's key */
        if (!t) return NULL;
        c.cat_text[c.ncat] = t;
        c.cat_len[c.ncat] = n;
        c.cat[c.ncat] = v;
        c.ncat++;
    }
    Py_INCREF(categories); /* keeps the texts and members alive */
    Py_INCREF(c.type);
    PyObject *out = PyList_New(0);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc;
    if (!out) goto error;
    Py_BEGIN_ALLOW_THREADS
    /* NOMUTEX: the connection is this call's alone (no mutex per column read). */
    rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                         NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) goto declined;
    for (Py_ssize_t row = 1;; row++) {
        if (row % YIELD_ROWS == 0) {
            /* let other threads run now and then (as the interpreter's switch
             * interval would), not around every step */
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
            /* and run the signal handlers, so that Ctrl-C stops a long open here
             * instead of after the last row (their exception is this call's) */
            if (PyErr_CheckSignals() < 0) goto error;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) goto declined;
        PyObject *pair = decode_row(st, &c);
        if (!pair) {
            if (PyErr_Occurred()) goto error;
            goto declined;
        }
        int failed = PyList_Append(out, pair);
        Py_DECREF(pair);
        if (failed) goto error;
    }
    goto done;
declined:
    Py_CLEAR(out);
    out = Py_NewRef(Py_None);
    goto done;
error:
    Py_CLEAR(out);
done:
    Py_BEGIN_ALLOW_THREADS
    sqlite3_finalize(st);
    sqlite3_close(db);
    Py_END_ALLOW_THREADS
    ctx_clear(&c);
    Py_DECREF(c.type);
    Py_DECREF(categories);
    return out;
}

PyDoc_STRVAR(source_id_doc,
"source_id() -> str\n\n"
"sqlite3_sourceid() of the SQLite this module is linked against (to compare with the\n"
"one Python's sqlite3 runs: select sqlite_source_id()). O(1).");

static PyObject *
source_id(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(sqlite3_sourceid());
}

static PyMethodDef methods[] = {
    {"read_entries", read_entries, METH_VARARGS, read_entries_doc},
    {"source_id", source_id, METH_NOARGS, source_id_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "actormem._storage._crows",
    .m_doc = "A durable memory's rows read and decoded in C (see sqlite_format.read_file).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__crows(void)
{
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    return PyModule_Create(&module);
}
