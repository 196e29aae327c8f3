/* A durable memory's small group commits written in C (``sqlite._C_COMMIT``).
 *
 * Writer(uri, path, dev, ino, setup, statements) opens a read-write connection of its
 * own to a validated actormem file (WAL mode already), runs ``setup`` (the pragmas:
 * ``busy_timeout`` 0, the store's ``synchronous``, ``wal_autocheckpoint`` 0) and
 * prepares the commit's nine statements once. Writer.commit(image_key, deletes, puts,
 * accesses, vectors) is ``SqliteStore._write`` of a batch that ``inline_ok`` allows, on
 * this connection: the path's identity (one stat(2), dev and inode), ``BEGIN
 * IMMEDIATE``, the image marker's delete, the deletes (entries, then vectors), the
 * puts, the access updates, the vectors, ``COMMIT``; the same statements in the same
 * order as the Python path, so the file gets the same rows. No Python object is made
 * per row and the GIL is held throughout (a batch is at most ``INLINE_ROWS`` rows).
 *
 * After a commit, ``Writer.frames`` is the pages it appended to the WAL: SQLite's own
 * count of the pages its pager wrote (``SQLITE_DBSTATUS_CACHE_WRITE``, read and reset
 * after the ``COMMIT``; in WAL mode each written page is one frame), so that the store
 * counts its WAL's frames as SQLite's automatic checkpoint does (``sqlite._REAL_FRAMES``).
 * Never fewer than the WAL grew by: a page spilled from the cache before the ``COMMIT``
 * and written again by it overwrites its frame in place but counts twice (a batch larger
 * than the page cache; tests/test_rev52b_frames.py).
 *
 * It returns 1 once committed; 0 when another connection holds the write lock
 * (SQLITE_BUSY at BEGIN: nothing done, the caller hands the batch to the thread); -1,
 * with nothing done, when a value is not one it binds as Python's ``sqlite3`` would
 * (only exact int within 64 bits, float, str encodable in UTF-8, bytes and None are
 * bound here), a row has the wrong length, or the path does not name the file opened:
 * the caller then takes the Python path, which commits or raises the same error as
 * before. A failing statement rolls the transaction back and raises
 * ``sqlite3.OperationalError`` (or the class Python's ``sqlite3`` would use) with
 * SQLite's message and ``sqlite_errorcode`` / ``sqlite_errorname`` set.
 *
 * Linked against the system's SQLite; sqlite.py uses it only when that is the library
 * Python's ``sqlite3`` runs (the same source id and the same loaded copy: same_library,
 * _samelib.h): two copies of SQLite in one process do not see each other's POSIX locks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include "_samelib.h"  /* same_library: the same loaded SQLite as _sqlite3 */
#include <sys/stat.h>
#include <errno.h>

enum { S_BEGIN, S_COMMIT, S_ROLLBACK, S_IMAGE, S_DEL_ENTRY, S_DEL_VECTOR, S_PUT, S_ACCESS,
       S_VECTOR, N_STATEMENTS };

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    sqlite3_stmt *st[N_STATEMENTS];
    int nparams[N_STATEMENTS];
    char *path;
    unsigned long long dev, ino;
    long long frames; /* pages the last successful commit appended to the WAL */
} writer_t;

static PyObject *error_classes; /* dict: name -> sqlite3 exception class */

static void
writer_close_db(writer_t *w)
{
    for (int i = 0; i < N_STATEMENTS; i++) {
        sqlite3_finalize(w->st[i]);
        w->st[i] = NULL;
    }
    if (w->db) {
        sqlite3_close_v2(w->db);
        w->db = NULL;
    }
}

static void
writer_dealloc(writer_t *w)
{
    writer_close_db(w);
    PyMem_Free(w->path);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* The exception Python's sqlite3 raises for a result code (its _pysqlite_seterror's
 * mapping), with SQLite's message and the code's attributes; always returns NULL. */
static PyObject *
raise_sqlite(sqlite3 *db, int code)
{
    const char *cls;
    switch (code & 0xff) {
    case SQLITE_INTERNAL:
    case SQLITE_NOTFOUND: cls = "InternalError"; break;
    case SQLITE_NOMEM: return PyErr_NoMemory();
    case SQLITE_ERROR: case SQLITE_PERM: case SQLITE_ABORT: case SQLITE_BUSY:
    case SQLITE_LOCKED: case SQLITE_READONLY: case SQLITE_INTERRUPT: case SQLITE_IOERR:
    case SQLITE_FULL: case SQLITE_CANTOPEN: case SQLITE_PROTOCOL: case SQLITE_EMPTY:
    case SQLITE_SCHEMA: cls = "OperationalError"; break;
    case SQLITE_CORRUPT: cls = "DatabaseError"; break;
    case SQLITE_TOOBIG: cls = "DataError"; break;
    case SQLITE_CONSTRAINT: case SQLITE_MISMATCH: cls = "IntegrityError"; break;
    case SQLITE_MISUSE: case SQLITE_RANGE: cls = "InterfaceError"; break;
    default: cls = "DatabaseError"; break;
    }
    /* The message and the code read from db first: making the exception may run the
     * collector, whose callbacks or finalizers may close the writer (and db). A str is
     * not a tracked object: making it runs no collection. */
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(code);
    if (db && (sqlite3_extended_errcode(db) & 0xff) == (code & 0xff))
        code = sqlite3_extended_errcode(db); /* what Python's sqlite3 reports */
    PyObject *text = PyUnicode_FromString(msg ? msg : "unknown error");
    if (!text) return NULL;
    PyObject *type = error_classes ? PyDict_GetItemString(error_classes, cls) : NULL;
    if (!type) type = PyExc_RuntimeError;
    PyObject *exc = PyObject_CallOneArg(type, text);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *num = PyLong_FromLong(code);
    PyObject *names = error_classes ? PyDict_GetItemString(error_classes, "") : NULL;
    PyObject *name = (names && num) ? PyDict_GetItem(names, num) : NULL;
    if (!num || PyObject_SetAttrString(exc, "sqlite_errorcode", num) < 0 ||
        PyObject_SetAttrString(exc, "sqlite_errorname", name ? name : Py_None) < 0) {
        Py_XDECREF(num);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(num);
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

static int
writer_init(writer_t *w, PyObject *args, PyObject *kw)
{
    const char *uri, *path, *setup;
    unsigned long long dev, ino;
    PyObject *sqls;
    if (!PyArg_ParseTuple(args, "syKKsO!", &uri, &path, &dev, &ino, &setup, &PyTuple_Type,
                          &sqls))
        return -1;
    if (PyTuple_GET_SIZE(sqls) != N_STATEMENTS) {
        PyErr_Format(PyExc_ValueError, "Writer takes %d statements", N_STATEMENTS);
        return -1;
    }
    for (int i = 0; i < N_STATEMENTS; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(sqls, i))) {
            PyErr_SetString(PyExc_TypeError, "Writer's statements are str");
            return -1;
        }
    }
    if (w->db || w->path) {
        PyErr_SetString(PyExc_RuntimeError, "Writer is initialised once");
        return -1;
    }
    size_t n = strlen(path) + 1;
    w->path = PyMem_Malloc(n);
    if (!w->path) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(w->path, path, n);
    w->dev = dev;
    w->ino = ino;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_open_v2(uri, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(w->db, setup, NULL, NULL, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) goto fail;
    for (int i = 0; i < N_STATEMENTS; i++) {
        Py_ssize_t len;
        const char *sql = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(sqls, i), &len);
        if (!sql) goto fail_py;
        rc = sqlite3_prepare_v3(w->db, sql, (int)len, SQLITE_PREPARE_PERSISTENT, &w->st[i],
                                NULL);
        if (rc != SQLITE_OK) goto fail;
        if (!w->st[i]) {
            PyErr_SetString(PyExc_ValueError, "Writer: an empty statement");
            goto fail_py;
        }
        w->nparams[i] = sqlite3_bind_parameter_count(w->st[i]);
    }
    /* the file must already be in WAL mode (the Python connection set it) */
    sqlite3_stmt *mode = NULL;
    rc = sqlite3_prepare_v2(w->db, "PRAGMA journal_mode", -1, &mode, NULL);
    if (rc != SQLITE_OK) goto fail;
    rc = sqlite3_step(mode);
    int wal = rc == SQLITE_ROW && sqlite3_column_type(mode, 0) == SQLITE_TEXT &&
              sqlite3_stricmp((const char *)sqlite3_column_text(mode, 0), "wal") == 0;
    sqlite3_finalize(mode);
    if (!wal) {
        PyErr_SetString(PyExc_ValueError, "Writer: the file is not in WAL mode");
        goto fail_py;
    }
    int cur = 0, hi = 0; /* the pages written so far (none: setup writes no page) */
    (void)sqlite3_db_status(w->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 1);
    w->frames = 0;
    return 0;
fail:
    raise_sqlite(w->db, rc);
fail_py:
    writer_close_db(w);
    return -1;
}

/* Whether every row of `rows` (a list of tuples of `n` values) binds here: exact int
 * within 64 bits, float, str (its UTF-8 made and cached now), bytes, None. 1 yes,
 * 0 no (no exception), -1 an exception other than a value's (MemoryError). */
static int
rows_bind(PyObject *rows, int n)
{
    if (!PyList_CheckExact(rows)) return 0;
    Py_ssize_t m = PyList_GET_SIZE(rows);
    for (Py_ssize_t r = 0; r < m; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != n) return 0;
        for (int j = 0; j < n; j++) {
            PyObject *v = PyTuple_GET_ITEM(row, j);
            if (v == Py_None || PyFloat_CheckExact(v)) continue;
            if (PyBytes_CheckExact(v)) {
                if (PyBytes_GET_SIZE(v) > INT_MAX) return 0;
                continue;
            }
            if (PyLong_CheckExact(v)) {
                int overflow;
                (void)PyLong_AsLongLongAndOverflow(v, &overflow);
                if (overflow) return 0;
                if (PyErr_Occurred()) return -1;
                continue;
            }
            if (PyUnicode_CheckExact(v)) {
                Py_ssize_t len;
                if (!PyUnicode_AsUTF8AndSize(v, &len)) {
                    if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                        PyErr_Clear();
                        return 0;
                    }
                    return -1;
                }
                if (len > INT_MAX) return 0;
                continue;
            }
            return 0;
        }
    }
    return 1;
}

/* Bind a row (checked by rows_bind) to `st`. SQLITE_STATIC: the row's objects outlive
 * the statement's step (the caller holds the lists; the step runs before we return). */
static int
bind_row(sqlite3_stmt *st, PyObject *row)
{
    Py_ssize_t n = PyTuple_GET_SIZE(row);
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *v = PyTuple_GET_ITEM(row, j);
        int i = (int)j + 1, rc;
        if (v == Py_None) {
            rc = sqlite3_bind_null(st, i);
        } else if (PyLong_CheckExact(v)) {
            rc = sqlite3_bind_int64(st, i, PyLong_AsLongLong(v));
        } else if (PyFloat_CheckExact(v)) {
            rc = sqlite3_bind_double(st, i, PyFloat_AS_DOUBLE(v));
        } else if (PyUnicode_CheckExact(v)) {
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(v, &len); /* cached by rows_bind */
            rc = sqlite3_bind_text(st, i, s, (int)len, SQLITE_STATIC);
        } else {
            rc = sqlite3_bind_blob(st, i, PyBytes_AS_STRING(v), (int)PyBytes_GET_SIZE(v),
                                   SQLITE_STATIC);
        }
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* Step `st` once (a statement without rows) and reset it. */
static int
step_reset(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Every row of `rows` through `st`. */
static int
run_rows(sqlite3_stmt *st, PyObject *rows)
{
    Py_ssize_t m = PyList_GET_SIZE(rows);
    for (Py_ssize_t r = 0; r < m; r++) {
        int rc = bind_row(st, PyList_GET_ITEM(rows, r));
        if (rc == SQLITE_OK) rc = step_reset(st);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

PyDoc_STRVAR(commit_doc,
"commit(image_key, deletes, puts, accesses, vectors) -> int\n\n"
"One group commit on the writer's connection: image_key (str or None) the meta row to\n"
"delete first; deletes a list of (seq,); puts a list of full entry rows; accesses a\n"
"list of UPDATE_ACCESS parameters; vectors a list of (seq, text_hash, vector). 1:\n"
"committed; 0: the write lock is held by another connection (nothing done); -1: a\n"
"value it does not bind, an argument that is not a list of tuples of the statement's\n"
"length, or the path no longer names the file (nothing done: take\n"
"the Python path). A failing statement rolls back and raises sqlite3's error.\n"
"O(rows), the GIL held.");

static PyObject *
writer_commit(writer_t *w, PyObject *args)
{
    PyObject *image_key, *lists[4];
    if (!PyArg_ParseTuple(args, "OOOOO", &image_key, &lists[0], &lists[1], &lists[2],
                          &lists[3]))
        return NULL;
    if (image_key != Py_None && !PyUnicode_CheckExact(image_key)) {
        PyErr_SetString(PyExc_TypeError, "commit: image_key is a str or None");
        return NULL;
    }
    if (!w->db) {
        PyErr_SetString(PyExc_ValueError, "commit: the writer is closed");
        return NULL;
    }
    static const int stmt_of[4] = {S_DEL_ENTRY, S_PUT, S_ACCESS, S_VECTOR};
    for (int k = 0; k < 4; k++) {
        int ok = rows_bind(lists[k], w->nparams[stmt_of[k]]);
        if (ok < 0) return NULL;
        if (!ok) return PyLong_FromLong(-1);
    }
    if (w->nparams[S_DEL_VECTOR] != 1 || w->nparams[S_IMAGE] != 1) return PyLong_FromLong(-1);
    Py_ssize_t keylen = 0;
    const char *key = NULL;
    if (image_key != Py_None) {
        key = PyUnicode_AsUTF8AndSize(image_key, &keylen);
        if (!key) {
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
    }
    struct stat sb;
    if (stat(w->path, &sb) != 0 || (unsigned long long)sb.st_dev != w->dev ||
        (unsigned long long)sb.st_ino != w->ino)
        return PyLong_FromLong(-1); /* the Python path raises the reason */
    int rc = step_reset(w->st[S_BEGIN]);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_BUSY) return PyLong_FromLong(0);
        return raise_sqlite(w->db, rc);
    }
    if (key) {
        rc = sqlite3_bind_text(w->st[S_IMAGE], 1, key, (int)keylen, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = step_reset(w->st[S_IMAGE]);
    }
    if (rc == SQLITE_OK) rc = run_rows(w->st[S_DEL_ENTRY], lists[0]);
    if (rc == SQLITE_OK) rc = run_rows(w->st[S_DEL_VECTOR], lists[0]);
    if (rc == SQLITE_OK) rc = run_rows(w->st[S_PUT], lists[1]);
    if (rc == SQLITE_OK) rc = run_rows(w->st[S_ACCESS], lists[2]);
    if (rc == SQLITE_OK) rc = run_rows(w->st[S_VECTOR], lists[3]);
    if (rc == SQLITE_OK) rc = step_reset(w->st[S_COMMIT]);
    if (rc != SQLITE_OK) {
        /* the message before the rollback replaces it */
        raise_sqlite(w->db, rc);
        /* (closed meanwhile by code the exception's making ran: closing rolled back) */
        if (w->db && !sqlite3_get_autocommit(w->db)) step_reset(w->st[S_ROLLBACK]);
        if (w->db) {  /* a rolled-back transaction's spilled pages are not the next's */
            int cur = 0, hi = 0;
            (void)sqlite3_db_status(w->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 1);
        }
        w->frames = -1;
        return NULL;
    }
    int cur = 0, hi = 0;
    if (sqlite3_db_status(w->db, SQLITE_DBSTATUS_CACHE_WRITE, &cur, &hi, 1) != SQLITE_OK)
        cur = -1;
    w->frames = cur;
    return PyLong_FromLong(1);
}

PyDoc_STRVAR(close_doc, "close() -> None: finalize the statements and close the "
                        "connection (SQLite's close never checkpoints while another "
                        "connection to the file is open). Idempotent.");

static PyObject *
writer_close(writer_t *w, PyObject *unused)
{
    writer_close_db(w);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(close_uncheckpointed_doc,
"close_uncheckpointed() -> None: close() with SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE set on the\n"
"connection first: if it is the file's last, SQLite leaves the WAL (and -shm) as they\n"
"are instead of copying the WAL into the database and deleting it. Every commit is\n"
"still in the WAL (the next open of the file recovers from it); only for a file that\n"
"is deleted right after. Idempotent.");

static PyObject *
writer_close_uncheckpointed(writer_t *w, PyObject *unused)
{
    if (w->db) {
        /* A failure only leaves SQLite's default (checkpoint on the last close). */
        (void)sqlite3_db_config(w->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
    }
    writer_close_db(w);
    Py_RETURN_NONE;
}

static PyObject *
writer_closed(writer_t *w, void *unused)
{
    return PyBool_FromLong(w->db == NULL);
}

static PyObject *
writer_in_transaction(writer_t *w, void *unused)
{
    return PyBool_FromLong(w->db != NULL && !sqlite3_get_autocommit(w->db));
}

static PyMethodDef writer_methods[] = {
    {"commit", (PyCFunction)writer_commit, METH_VARARGS, commit_doc},
    {"close", (PyCFunction)writer_close, METH_NOARGS, close_doc},
    {"close_uncheckpointed", (PyCFunction)writer_close_uncheckpointed, METH_NOARGS,
     close_uncheckpointed_doc},
    {NULL, NULL, 0, NULL},
};

static PyObject *
writer_frames(writer_t *w, void *unused)
{
    return PyLong_FromLongLong(w->frames);
}

static PyGetSetDef writer_getset[] = {
    {"frames", (getter)writer_frames, NULL,
     "The pages (WAL frames) the last commit that returned 1 wrote: SQLite's count "
     "(SQLITE_DBSTATUS_CACHE_WRITE), never fewer than the WAL grew by (a page spilled "
     "before the COMMIT and written again counts twice); -1 when SQLite did not tell, "
     "or after a failed commit; 0 before any.", NULL},
    {"closed", (getter)writer_closed, NULL, "Whether close() was called.", NULL},
    {"in_transaction", (getter)writer_in_transaction, NULL,
     "Whether a transaction is open (never, between calls).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject writer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._storage._cwrite.Writer",
    .tp_basicsize = sizeof(writer_t),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Writer(uri, path, dev, ino, setup, statements): a connection of its own "
              "for small group commits (see the module).",
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_init = (initproc)writer_init,
    .tp_new = PyType_GenericNew,
};

PyDoc_STRVAR(source_id_doc, "source_id() -> str: sqlite3_sourceid() of the linked SQLite.");

static PyObject *
source_id(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(sqlite3_sourceid());
}

PyDoc_STRVAR(set_errors_doc,
"set_errors(classes) -> None: the sqlite3 exception classes by name, and under the key\n"
"'' a dict of result code to its SQLITE_ name (sqlite_errorname).");

static PyObject *
set_errors(PyObject *self, PyObject *classes)
{
    if (!PyDict_Check(classes)) {
        PyErr_SetString(PyExc_TypeError, "set_errors takes a dict");
        return NULL;
    }
    Py_XSETREF(error_classes, Py_NewRef(classes));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"source_id", source_id, METH_NOARGS, source_id_doc},
    {"same_library", same_library, METH_VARARGS, same_library_doc},
    {"set_errors", set_errors, METH_O, set_errors_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "actormem._storage._cwrite",
    .m_doc = "A durable memory's small group commits in C (see sqlite._C_COMMIT).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cwrite(void)
{
    if (PyType_Ready(&writer_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Writer", (PyObject *)&writer_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
