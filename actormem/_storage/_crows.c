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
#include "_samelib.h"  /* same_library: the same loaded SQLite as _sqlite3 */
#include <string.h>

#include "../_index/_kernels_common.h"
#include "../_index/_foldhash.h"
#include "../_index/_entrycols_api.h"

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
    /* read_entries(..., cols): the store the rows are put in (rows as (seq, slot)), its
     * interface and each reader category's code in it */
    PyObject *cols;
    const ec_api_t *api;
    int cat_code[MAX_CATEGORIES];
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

/* `f(the UTF-8 text p[0:n])` through a one-entry cache of the last text; new reference,
 * or NULL (declined: not UTF-8, or f raised an Exception). */
static PyObject *
bytes_converted(const char *p, Py_ssize_t n, PyObject *f, PyObject **last_text, PyObject **last)
{
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

/* bytes_converted over column i; NULL also when it is not TEXT. */
static PyObject *
column_converted(sqlite3_stmt *st, int i, PyObject *f, PyObject **last_text, PyObject **last)
{
    if (sqlite3_column_type(st, i) != SQLITE_TEXT) return NULL;
    const char *p = (const char *)sqlite3_column_text(st, i);
    Py_ssize_t n = sqlite3_column_bytes(st, i);
    if (!p) return NULL;
    return bytes_converted(p, n, f, last_text, last);
}

/* Whether a str has at most `limit` code points. (Strict UTF-8 leaves no surrogate.) */
static inline int
short_enough(PyObject *s, Py_ssize_t limit)
{
    return PyUnicode_GET_LENGTH(s) <= limit;
}

/* A row's values dropped: each of vals[0:ENTRY_FIELDS] released, an Exception cleared
 * (the row is declined); NULL. */
static PyObject *
row_declined(PyObject **vals)
{
    for (int i = 0; i < ENTRY_FIELDS; i++) Py_CLEAR(vals[i]);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return NULL;
}

/* The (seq, entry) pair of a decoded row: the entry allocated bare and its slots given
 * vals[0:ENTRY_FIELDS] (stolen, on every path); NULL as row_declined, or with the
 * pair's own MemoryError set. */
static PyObject *
row_pair(ctx_t *c, PyObject **vals, long long s)
{
    PyObject *seq = PyLong_FromLongLong(s);
    if (!seq) return row_declined(vals);
    PyObject *entry = c->type->tp_alloc(c->type, 0);
    if (!entry) {
        Py_DECREF(seq);
        return row_declined(vals);
    }
    for (int i = 0; i < ENTRY_FIELDS; i++) {
        PyObject **slot = (PyObject **)((char *)entry + c->off[i]);
        Py_XSETREF(*slot, vals[i]); /* steals */
        vals[i] = NULL;
    }
    PyObject *pair = PyTuple_Pack(2, seq, entry);
    Py_DECREF(entry);
    Py_DECREF(seq);
    return pair; /* NULL: the tuple's MemoryError, raised (not a declined row) */
}

/* The row's (seq, entry), or NULL: declined (no error set) or an error to raise. */
static PyObject *
decode_row(sqlite3_stmt *st, ctx_t *c)
{
    PyObject *vals[ENTRY_FIELDS] = {NULL};
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
    return row_pair(c, vals, s);
fail:
    return row_declined(vals);
}

/* ---- The split reader: SQLite's steps in a thread of their own, without the GIL ----
 *
 * read_entries(..., threaded=True): a producer thread (plain pthread, never touching a
 * Python object) opens the connection, steps through the rows and copies each row's
 * columns into a chunk: its numbers, its texts' bytes into the chunk's arena, the id's
 * 32 hex digits and the times' fields already parsed and every check that needs no
 * Python object already made. The caller's thread, holding the GIL, takes the chunks
 * in order and builds the entries from them (decode_chunk_row: the same objects and
 * checks as decode_row). SQLite's page reads, b-tree walk and record decoding (about a
 * third of the reader's time) then run on another core beside the object building.
 *
 * A row the producer declines (or any SQLite error) ends the whole read with None, as
 * a declined row does in the one-thread path. The producer is joined on every path
 * out of read_entries (the rows done, a row declined, an error, a signal's exception):
 * the caller sets `stop` and waits for it, with the GIL released. At most nchunks chunks
 * of CHUNK_ROWS rows exist at once (their arenas grow to the largest chunk's texts). */
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* A buffer's hash as str's hash computes it over a one-byte-kind str's data, callable
 * without the GIL (it reads the process's hash secret only). */
#define HASH_BYTES(p, n) AM_HASH_BYTES((p), (n)) /* _kernels_common.h */
/* The id's int from its 16 big-endian bytes (unsigned): int(hex, 16)'s value. */
#define ID_FROM_BYTES(p) long_from_unsigned_bytes((p), 16, 0)

#define CHUNK_ROWS 256
/* The most chunks chunks_ahead() accepts (256 rows each). */
#define CHUNKS_MAX 4096

typedef struct {
    uint32_t off, len;
} span_t;

/* A time column: absent (NULL), or its seven fields. */
typedef struct {
    int null;
    int f[7];
} utc_t;

typedef struct {
    long long seq, access;
    double rel, ttl;
    int cat, validated, ttl_null, key_null, value_null, updated_same;
    /* the memory text is ASCII (its str is its bytes); then `memory_hash` is its str's
     * hash when the feed hashes (hash_memory) */
    int memory_ascii;
    Py_hash_t memory_hash;
    /* the memory text's fold_hash (_foldhash.h) when the feed folds, else NO_FOLD */
    uint64_t fold;
    unsigned char id[16]; /* the id's 128 bits, big-endian */
    utc_t created, accessed, updated, expires;
    span_t memory, tags, ns, key, value;
} brow_t;

typedef struct {
    brow_t rows[CHUNK_ROWS];
    int nrows;
    char *arena;
    size_t used, cap;
} chunk_t;

enum { P_RUNNING, P_DONE, P_DECLINED };

/* Ids held back before they are put in the id table (id_prefetch). */
#define ID_LAG 16

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    chunk_t *chunks; /* nchunks of them, filled and taken in turn */
    int nchunks;
    long long filled, taken; /* chunks published / chunks given back */
    int status;              /* P_*: set with the last chunk published */
    int stop;                /* the caller gives up: the producer ends at once */
    double waited;           /* wall seconds the producer waited for a free chunk */
    /* the producer's inputs (copied before it starts; never Python objects) */
    char *uri, *sql;
    const char *cat_text[MAX_CATEGORIES];
    Py_ssize_t cat_len[MAX_CATEGORIES];
    int ncat;
    long long max_seq;
    double max_ttl;
    int hash_memory;
    int fold_memory; /* compute each ASCII memory text's fold hash (folds_out) */
    int fold_all;    /* and every other text's (CPython before 3.13) */
    int fold_pairs;  /* the ASCII ones two at a time at the chunk's end (fold_pairs_on) */
    int column_values; /* copy_row reads each column's sqlite3_value (column_values_on) */
    int fold_lanes;  /* those four chains at a time over their compacted bytes (fold_lanes_on) */
    int fold_wide;   /* and compacted by AVX-512 (fold_wide_on) */
    unsigned char *fold_buf; /* fold_lanes' scratch (this thread's), fold_cap bytes */
    size_t fold_cap;
    /* the ids seen (check_ids): an open-addressing set of their 128 bits (both words
     * zero: an empty slot; the zero id is `ids_zero`), `ids_dup` once one came twice */
    int check_ids, ids_zero, ids_dup;
    uint64_t *ids;
    size_t ids_mask, ids_count;
    /* the ids expected (ids_presize: the file's seq range, rows_expected), 0: unknown;
     * the table's first allocation holds them without growing */
    size_t ids_hint;
    int ids_presize; /* ids_presize_on, as the read began */
    /* id_prefetch: the last ID_LAG ids noted, not yet put (their slots prefetched when
     * they came, so the put finds its cache line in); `lag_n` of them, the oldest at
     * `lag_at` */
    int id_lag;
    int lag_n, lag_at;
    uint64_t lag[ID_LAG][2];
} feed_t;

/* A row whose fold hash the thread did not compute (outside [0, 2**62)). */
#define NO_FOLD UINT64_MAX

/* fold_pairs(): the split reader computes the ASCII memory texts' fold hashes once a
 * chunk's rows are copied, two texts at a time (fold_hash_ascii_pair), instead of one
 * per row as it copies it (0: the path before, branch open29). The same values. */
static int fold_pairs_on = 1;

/* fold_lanes(): chunk_folds compacts the chunk's ASCII memory texts first (each byte
 * through the fold table, a whitespace run as one space: fold_ascii_compact, without a
 * branch) and then runs their plain FNV chains four at a time (fold_hash_ascii_many),
 * instead of fold_hash_ascii_pair's two chains that branch on every byte (a word's
 * end every ~6 bytes mispredicts): the fold was ~0.4-0.6 s of the thread's ~1.4 s at
 * the bench's 1M file. The same values. 0: the pairs (the path before, branch open52);
 * also taken when the scratch cannot grow. */
static int fold_lanes_on = 1;
/* fold_lanes compacts by AVX-512 (fold_ascii_compact_x512) on a CPU that has it
 * (fold_x512_ok: set at import by fold_x512_usable, read-only after); fold_wide(False)
 * turns it off (the branch-free loop, every CPU's path: so that it can be read on this
 * one too), fold_wide(True) back on where the CPU has it. Copied into a read's feed at
 * its start (the thread never reads the global). */
static int fold_x512_ok = 0;
static int fold_wide_on = 0;

/* _foldhash.h's table: filled at import, read-only after (the threads read it). */
static unsigned char fold_tab[256];

#define IDS_FIRST 1024 /* slots at first; doubled at half full */

static inline size_t
id_slot(uint64_t hi, uint64_t lo, size_t mask)
{
    /* splitmix64's finalizer over both words: a file's ids cannot pile onto one run */
    uint64_t z = hi * 0x9E3779B97F4A7C15ULL ^ lo;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (size_t)(z ^ (z >> 31)) & mask;
}

/* Put (hi, lo) in the table of `mask + 1` slots: 1 if it was there already. */
static int
id_put(uint64_t *t, size_t mask, uint64_t hi, uint64_t lo)
{
    for (size_t i = id_slot(hi, lo, mask);; i = (i + 1) & mask) {
        if (t[2 * i] == 0 && t[2 * i + 1] == 0) {
            t[2 * i] = hi;
            t[2 * i + 1] = lo;
            return 0;
        }
        if (t[2 * i] == hi && t[2 * i + 1] == lo) return 1;
    }
}

/* The id table's memory, zeroed: `slots` slots of two words. From 2 MiB on (256k
 * ids), with ids_huge_on, 2 MiB aligned and asked of the kernel as transparent huge
 * pages (MADV_HUGEPAGE; this system's THP mode may be "madvise"): each row probes a
 * random slot, and with 4 KiB pages a 32 MiB table (1M ids) missed the TLB on nearly
 * every probe (a page walk, dearer in a VM); 16 huge pages stay in it. Freed by free().
 * NULL when out of memory. */
static int ids_huge_on = 1;

static uint64_t *
ids_alloc(size_t slots)
{
    size_t bytes = slots * 2 * sizeof(uint64_t);
#ifdef __linux__
    if (ids_huge_on && bytes >= HUGE_PAGE_BYTES) {
        size_t whole = (bytes + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1);
        void *p = aligned_alloc(HUGE_PAGE_BYTES, whole);
        if (!p) return NULL;
        (void)huge_advise(p, whole, MADV_HUGEPAGE); /* a hint: refused, pages stay small */
        memset(p, 0, bytes);
        return p;
    }
#endif
    return calloc(slots, 2 * sizeof(uint64_t));
}

/* Note the id (hi, lo); a second one sets ids_dup; out of memory stops the check. */
static void
id_seen(feed_t *f, uint64_t hi, uint64_t lo)
{
    if (hi == 0 && lo == 0) {
        if (f->ids_zero) f->ids_dup = 1;
        f->ids_zero = 1;
        return;
    }
    if (2 * (f->ids_count + 1) > f->ids_mask + 1 || !f->ids) {
        size_t slots = f->ids ? 2 * (f->ids_mask + 1) : IDS_FIRST;
        while (!f->ids && slots < 2 * (f->ids_hint + 1)) slots *= 2; /* hint <= IDS_HINT_MAX */
        uint64_t *t = ids_alloc(slots);
        if (!t) {
            f->check_ids = 0;
            return;
        }
        if (f->ids) {
            for (size_t i = 0; i <= f->ids_mask; i++) {
                if (f->ids[2 * i] || f->ids[2 * i + 1])
                    id_put(t, slots - 1, f->ids[2 * i], f->ids[2 * i + 1]);
            }
            free(f->ids);
        }
        f->ids = t;
        f->ids_mask = slots - 1;
    }
    if (id_put(f->ids, f->ids_mask, hi, lo)) f->ids_dup = 1;
    else f->ids_count++;
}

/* Whether the split reader sizes its id table once for the rows it expects
 * (id_presize), instead of doubling it from IDS_FIRST slots: at 1M rows the doublings
 * allocated and zeroed 32 MiB besides the final table's 32 and re-put ~1M ids at
 * random slots (open31). */
static int ids_presize_on = 1;
/* The most ids a hint sizes the table for (64 Mi slots, 1 GiB: a file's seq range is
 * believed only up to its size over IDS_HINT_ROW_BYTES as well). */
#define IDS_HINT_MAX ((size_t)1 << 25)
#define IDS_HINT_ROW_BYTES 64

/* The rows a file's entries table may hold, by its seq range (two O(log n) seeks of
 * the rowid tree), at most its bytes over IDS_HINT_ROW_BYTES and IDS_HINT_MAX; 0 when
 * unknown (any SQLite error, an empty table). Only sizes a table: a wrong hint costs
 * a resize or address space, never a result. */
static size_t
rows_expected(sqlite3 *db)
{
    static const char *const sql[2] = {
        "SELECT (SELECT max(seq) FROM entries) - (SELECT min(seq) FROM entries) + 1",
        "SELECT (SELECT page_count FROM pragma_page_count()) * "
        "(SELECT page_size FROM pragma_page_size())",
    };
    sqlite3_int64 v[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql[i], -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER) {
            v[i] = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
        if (v[i] <= 0) return 0;
    }
    size_t rows = (size_t)v[0], most = (size_t)v[1] / IDS_HINT_ROW_BYTES;
    if (rows > most) rows = most;
    return rows > IDS_HINT_MAX ? IDS_HINT_MAX : rows;
}

/* Whether the split reader holds ids back and prefetches their slots (id_prefetch). */
static int id_prefetch_on = 1;
/* The chunks a split read may fill ahead of the caller (chunks_ahead()). */
static int chunks_ahead_n = 64;

/* Note the row's id: at once (id_prefetch off), or after the next ID_LAG ids, its slot
 * in the table prefetched now (the table is a random access per row, 32 MiB at 1M: the
 * put then finds the line in the cache instead of waiting for it). The same set, the
 * same ids_dup once id_flush ran. */
static void
id_note(feed_t *f, const unsigned char id[16])
{
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | id[i];
        lo = lo << 8 | id[8 + i];
    }
    if (!f->id_lag) {
        id_seen(f, hi, lo);
        return;
    }
    if (f->ids) __builtin_prefetch(&f->ids[2 * id_slot(hi, lo, f->ids_mask)], 1);
    uint64_t *slot = f->lag[f->lag_at];
    if (f->lag_n == ID_LAG) id_seen(f, slot[0], slot[1]); /* the oldest, put now */
    else f->lag_n++;
    slot[0] = hi;
    slot[1] = lo;
    f->lag_at = (f->lag_at + 1) % ID_LAG;
}

/* Put every id id_note holds back (at the end of the rows). */
static void
id_flush(feed_t *f)
{
    int first = (f->lag_at - f->lag_n + ID_LAG) % ID_LAG;
    for (int k = 0; k < f->lag_n && f->check_ids && !f->ids_dup; k++) {
        uint64_t *slot = f->lag[(first + k) % ID_LAG];
        id_seen(f, slot[0], slot[1]);
    }
    f->lag_n = 0;
}

/* Copy `n` bytes to the chunk's arena; its span, or 0 when out of memory. */
static int
arena_put(chunk_t *ch, const void *p, int n, span_t *out)
{
    if (n < 0) return 0;
    if (ch->used + (size_t)n > ch->cap) {
        size_t cap = ch->cap ? ch->cap : 65536;
        while (cap < ch->used + (size_t)n) cap *= 2;
        if (cap > UINT32_MAX) return 0;
        char *a = realloc(ch->arena, cap);
        if (!a) return 0;
        ch->arena = a;
        ch->cap = cap;
    }
    if (n) memcpy(ch->arena + ch->used, p, (size_t)n);
    out->off = (uint32_t)ch->used;
    out->len = (uint32_t)n;
    ch->used += (size_t)n;
    return 1;
}

/* column_values(): the split reader's thread reads a row's columns through each one's
 * sqlite3_value, fetched once a row (sqlite3_column_value), and the sqlite3_value_*
 * accessors, instead of a sqlite3_column_* call for each type, text, length and number
 * (36 a row, each entering and leaving the connection's mutex and running
 * sqlite3ApiExit: ~2,100 of the thread's ~11,400 instructions a row by callgrind). The
 * reader's connection is opened SQLITE_OPEN_NOMUTEX (the multi-thread mode, this
 * thread's alone), where SQLite makes no distinction between protected and unprotected
 * values; each value is read only while its row is current (before the next step), and
 * only as the type it has (no conversion). The same rows and refusals. 0: the
 * sqlite3_column_* calls (the path before). */
static int column_values_on = 1;

/* A row's columns as copy_row reads them: through `st`, or (`by_value`) through `v`. */
typedef struct {
    sqlite3_stmt *st;
    int by_value;
    sqlite3_value *v[COLUMNS];
} rowsrc_t;

/* Point `r` at the statement's current row (its values fetched when by_value). */
static inline void
rowsrc_fetch(rowsrc_t *r)
{
    if (!r->by_value) return;
    for (int i = 0; i < COLUMNS; i++) r->v[i] = sqlite3_column_value(r->st, i);
}

static inline int
rs_type(const rowsrc_t *r, int i)
{
    return r->by_value ? sqlite3_value_type(r->v[i]) : sqlite3_column_type(r->st, i);
}

static inline const unsigned char *
rs_text(const rowsrc_t *r, int i)
{
    return r->by_value ? sqlite3_value_text(r->v[i]) : sqlite3_column_text(r->st, i);
}

static inline int
rs_bytes(const rowsrc_t *r, int i)
{
    return r->by_value ? sqlite3_value_bytes(r->v[i]) : sqlite3_column_bytes(r->st, i);
}

static inline sqlite3_int64
rs_int64(const rowsrc_t *r, int i)
{
    return r->by_value ? sqlite3_value_int64(r->v[i]) : sqlite3_column_int64(r->st, i);
}

static inline double
rs_double(const rowsrc_t *r, int i)
{
    return r->by_value ? sqlite3_value_double(r->v[i]) : sqlite3_column_double(r->st, i);
}

/* A TEXT column's bytes into the arena: 1, or 0 (declined: not TEXT, or no memory). */
static int
copy_text(const rowsrc_t *st, int i, chunk_t *ch, span_t *out)
{
    if (rs_type(st, i) != SQLITE_TEXT) return 0;
    const char *p = (const char *)rs_text(st, i);
    if (!p) return 0;
    return arena_put(ch, p, rs_bytes(st, i), out);
}

/* A time column (NULL allowed when `nullable`) parsed: 1, or 0 (declined). */
static int
copy_utc(const rowsrc_t *st, int i, int nullable, utc_t *out)
{
    int t = rs_type(st, i);
    out->null = t == SQLITE_NULL;
    if (out->null) return nullable;
    if (t != SQLITE_TEXT) return 0;
    const char *p = (const char *)rs_text(st, i);
    return p && utc_fields(p, rs_bytes(st, i), out->f);
}

/* The current row into `b` (texts into the chunk's arena), with decode_row's checks
 * that need no Python object: 1, or 0 (declined). */
static int
copy_row(const rowsrc_t *st, feed_t *f, chunk_t *ch, brow_t *b)
{
    if (rs_type(st, 0) != SQLITE_INTEGER) return 0;
    b->seq = rs_int64(st, 0);
    if (b->seq < 1 || b->seq > f->max_seq) return 0;
    if (rs_type(st, 1) != SQLITE_TEXT) return 0;
    const char *idp = (const char *)rs_text(st, 1);
    char hex[33];
    if (!idp || !uuid_digits(idp, rs_bytes(st, 1), hex)) return 0;
    for (int i = 0; i < 16; i++) {
        int hi = hex[2 * i], lo = hex[2 * i + 1];
        hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
        lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
        b->id[i] = (unsigned char)(hi << 4 | lo);
    }
    if (f->check_ids && !f->ids_dup) id_note(f, b->id);
    if (rs_type(st, 2) != SQLITE_TEXT) return 0;
    const char *catp = (const char *)rs_text(st, 2);
    Py_ssize_t catn = rs_bytes(st, 2);
    b->cat = -1;
    for (int i = 0; catp && i < f->ncat; i++) {
        if (f->cat_len[i] == catn && memcmp(f->cat_text[i], catp, (size_t)catn) == 0) {
            b->cat = i;
            break;
        }
    }
    if (b->cat < 0) return 0;
    if (rs_type(st, 7) != SQLITE_FLOAT) return 0;
    b->rel = rs_double(st, 7);
    if (!(b->rel >= 0.0 && b->rel <= 1.0)) return 0;
    if (rs_type(st, 8) != SQLITE_INTEGER) return 0;
    b->access = rs_int64(st, 8);
    if (b->access < 0) return 0;
    if (rs_type(st, 10) != SQLITE_INTEGER) return 0;
    long long validated = rs_int64(st, 10);
    if (validated != 0 && validated != 1) return 0;
    b->validated = (int)validated;
    int ttl_type = rs_type(st, 14);
    b->ttl_null = ttl_type == SQLITE_NULL;
    b->ttl = 0.0;
    if (!b->ttl_null) {
        if (ttl_type != SQLITE_FLOAT) return 0;
        b->ttl = rs_double(st, 14);
        if (!(b->ttl > 0.0 && b->ttl <= f->max_ttl)) return 0;
    }
    if (!copy_text(st, 3, ch, &b->memory)) return 0;
    const unsigned char *mem = (const unsigned char *)ch->arena + b->memory.off;
    /* ASCII: no byte with its top bit set (eight bytes at a time) */
    uint64_t high = 0;
    uint32_t i = 0;
    for (; i + 8 <= b->memory.len; i += 8) {
        uint64_t w;
        memcpy(&w, mem + i, 8);
        high |= w;
    }
    for (; i < b->memory.len; i++) high |= mem[i];
    b->memory_ascii = !(high & 0x8080808080808080ULL) && b->memory.len > 0;
    b->memory_hash = -1;
    if (b->memory_ascii && f->hash_memory) b->memory_hash = HASH_BYTES(mem, b->memory.len);
    b->fold = NO_FOLD;
    if (b->memory_ascii && f->fold_memory) {
        if (!f->fold_pairs) /* else chunk_folds, at the chunk's end */
            b->fold = fold_hash_final(fold_hash_ascii_chain(FOLD_HASH_SEED, mem, b->memory.len, fold_tab));
    }
#if PY_VERSION_HEX < 0x030D0000 /* fold_hash folds per code point here (casefold() after) */
    else if (f->fold_memory && f->fold_all && !fold_hash_utf8(mem, b->memory.len, fold_tab, &b->fold))
        b->fold = NO_FOLD; /* not UTF-8: the caller declines the row anyway */
#endif
    if (!copy_text(st, 4, ch, &b->tags)) return 0;
    if (!copy_text(st, 5, ch, &b->ns)) return 0;
    if (!copy_utc(st, 6, 0, &b->created)) return 0;
    if (!copy_utc(st, 9, 1, &b->accessed)) return 0;
    b->key_null = rs_type(st, 11) == SQLITE_NULL;
    if (!b->key_null && !copy_text(st, 11, ch, &b->key)) return 0;
    b->value_null = rs_type(st, 12) == SQLITE_NULL;
    if (!b->value_null && !copy_text(st, 12, ch, &b->value)) return 0;
    /* updated_at: the created_at object when NULL or the same text (as most rows) */
    int up_type = rs_type(st, 13);
    b->updated_same = 1;
    if (up_type != SQLITE_NULL) {
        if (up_type != SQLITE_TEXT) return 0;
        const char *up = (const char *)rs_text(st, 13);
        Py_ssize_t upn = rs_bytes(st, 13);
        const char *cr = (const char *)rs_text(st, 6);
        Py_ssize_t crn = rs_bytes(st, 6);
        if (!(up && cr && upn == crn && memcmp(up, cr, (size_t)upn) == 0)) {
            b->updated_same = 0;
            if (!copy_utc(st, 13, 0, &b->updated)) return 0;
        }
    }
    if (!copy_utc(st, 15, 1, &b->expires)) return 0;
    return 1;
}

/* chunk_folds by fold_hash_ascii_many (f->fold_lanes): 1, or 0 (no memory for the
 * scratch: nothing set, the caller folds by pairs). */
static int
chunk_folds_lanes(feed_t *f, chunk_t *ch)
{
    /* (zeroed: -Wmaybe-uninitialized cannot see that only the first k are read) */
    const unsigned char *texts[CHUNK_ROWS] = {0};
    size_t lens[CHUNK_ROWS] = {0};
    uint64_t folds[CHUNK_ROWS];
    int rows[CHUNK_ROWS];
    size_t k = 0, need = 0;
    for (int r = 0; r < ch->nrows; r++) {
        brow_t *b = &ch->rows[r];
        if (!b->memory_ascii) continue;
        texts[k] = (const unsigned char *)ch->arena + b->memory.off;
        lens[k] = b->memory.len;
        rows[k] = r;
        need += b->memory.len;
        k++;
    }
    need += 64; /* fold_ascii_compact_x512's last store */
    if (need > f->fold_cap) {
        size_t cap = f->fold_cap ? f->fold_cap : 65536;
        while (cap < need) cap *= 2;
        unsigned char *buf = realloc(f->fold_buf, cap);
        if (!buf) return 0;
        f->fold_buf = buf;
        f->fold_cap = cap;
    }
    fold_hash_ascii_many(texts, lens, k, folds, fold_tab, f->fold_buf, f->fold_wide);
    for (size_t i = 0; i < k; i++) ch->rows[rows[i]].fold = fold_hash_final(folds[i]);
    return 1;
}

/* The fold hashes copy_row left to the chunk's end (f->fold_pairs): each ASCII memory
 * text's, two rows at a time (a last odd one alone). Before the chunk is published. */
static void
chunk_folds(feed_t *f, chunk_t *ch)
{
    if (!f->fold_memory || !f->fold_pairs) return;
    if (f->fold_lanes && chunk_folds_lanes(f, ch)) return;
    brow_t *pend = NULL;
    for (int r = 0; r < ch->nrows; r++) {
        brow_t *b = &ch->rows[r];
        if (!b->memory_ascii) continue;
        if (!pend) {
            pend = b;
            continue;
        }
        uint64_t h1, h2;
        fold_hash_ascii_pair((const unsigned char *)ch->arena + pend->memory.off,
                             pend->memory.len, &h1,
                             (const unsigned char *)ch->arena + b->memory.off, b->memory.len,
                             &h2, fold_tab);
        pend->fold = fold_hash_final(h1);
        b->fold = fold_hash_final(h2);
        pend = NULL;
    }
    if (pend) {
        const unsigned char *mem = (const unsigned char *)ch->arena + pend->memory.off;
        pend->fold = fold_hash_final(fold_hash_ascii_chain(FOLD_HASH_SEED, mem, pend->memory.len,
                                                           fold_tab));
    }
}

static void
feed_finish(feed_t *f, int status)
{
    pthread_mutex_lock(&f->mu);
    f->status = status;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* The CPU seconds every producer thread of this process used, summed (for benchmarks:
 * the CPU the read runs beside the caller's thread). */
static pthread_mutex_t feed_cpu_mu = PTHREAD_MUTEX_INITIALIZER;
static double feed_cpu_total = 0.0;
/* The wall seconds producer threads waited with every chunk full, summed. */
static double feed_wait_total = 0.0;

static double
wall_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
thread_cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *
feed_run(void *arg)
{
    double cpu0 = thread_cpu_now();
#ifdef __GLIBC__
    pthread_setname_np(pthread_self(), "actormem rows"); /* for ps, gdb and the tests */
#endif
    feed_t *f = arg;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int status = P_DECLINED;
    /* NOMUTEX: the connection is this thread's alone. */
    int rc = sqlite3_open_v2(f->uri, &db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, f->sql, -1, &st, NULL);
    if (rc != SQLITE_OK || sqlite3_column_count(st) != COLUMNS) goto out;
    if (f->check_ids && f->ids_presize) f->ids_hint = rows_expected(db);
    rowsrc_t src;
    src.st = st;
    src.by_value = f->column_values;
    for (long long k = 0;; k++) {
        pthread_mutex_lock(&f->mu);
        if (!f->stop && f->filled - f->taken >= f->nchunks) {
            /* every chunk full: the caller is behind (or busy with its idle work) */
            double w0 = wall_now();
            while (!f->stop && f->filled - f->taken >= f->nchunks) pthread_cond_wait(&f->cv, &f->mu);
            f->waited += wall_now() - w0;
        }
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) goto out;
        /* the chunk is this thread's until it is published */
        chunk_t *ch = &f->chunks[k % f->nchunks];
        ch->nrows = 0;
        ch->used = 0;
        int done = 0;
        while (ch->nrows < CHUNK_ROWS) {
            rc = sqlite3_step(st);
            if (rc == SQLITE_DONE) {
                if (f->check_ids && !f->ids_dup) id_flush(f); /* before it is read */
                done = 1;
                break;
            }
            if (rc != SQLITE_ROW) goto out;
            src.st = st;
            rowsrc_fetch(&src);
            if (!copy_row(&src, f, ch, &ch->rows[ch->nrows])) goto out;
            ch->nrows++;
        }
        chunk_folds(f, ch);
        pthread_mutex_lock(&f->mu);
        f->filled++;
        if (done) f->status = P_DONE;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (done) {
            status = P_DONE;
            goto closed;
        }
    }
out:
    feed_finish(f, status);
closed:
    sqlite3_finalize(st);
    sqlite3_close(db);
    double used = thread_cpu_now() - cpu0;
    pthread_mutex_lock(&f->mu);
    double waited = f->waited;
    pthread_mutex_unlock(&f->mu);
    pthread_mutex_lock(&feed_cpu_mu);
    feed_cpu_total += used;
    feed_wait_total += waited;
    pthread_mutex_unlock(&feed_cpu_mu);
    return NULL;
}

/* A str of the chunk's span (strict UTF-8), or NULL (declined, no error set, or an
 * error that is not an Exception). */
static PyObject *
span_str(const chunk_t *ch, span_t s)
{
    PyObject *r = PyUnicode_DecodeUTF8(ch->arena + s.off, s.len, "strict");
    if (!r && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return r;
}

static PyObject *
utc_object(const utc_t *t)
{
    PyObject *dt = PyDateTimeAPI->DateTime_FromDateAndTime(
        t->f[0], t->f[1], t->f[2], t->f[3], t->f[4], t->f[5], t->f[6],
        PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
    if (!dt && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return dt;
}

/* bytes_converted over a span of the chunk. */
static PyObject *
span_converted(const chunk_t *ch, span_t s, PyObject *f, PyObject **last_text, PyObject **last)
{
    return bytes_converted(ch->arena + s.off, s.len, f, last_text, last);
}

/* A copied row's last six fields (last_accessed, key, value, updated_at, ttl,
 * expires_at) into vals[9:15], vals[4] (created_at) made: 0, or -1 (declined, no error
 * set, or an error to raise; the caller releases vals). */
static int
chunk_row_tail(const chunk_t *ch, const brow_t *b, ctx_t *c, PyObject **vals)
{
    if (b->accessed.null) vals[9] = Py_NewRef(Py_None);
    else if (!(vals[9] = utc_object(&b->accessed))) return -1;
    if (b->key_null) vals[10] = Py_NewRef(Py_None);
    else if (!(vals[10] = span_str(ch, b->key)) || PyUnicode_GET_LENGTH(vals[10]) == 0 ||
             !short_enough(vals[10], c->max_key))
        return -1;
    if (b->value_null) vals[11] = Py_NewRef(Py_None);
    else {
        PyObject *text = span_str(ch, b->value);
        if (!text) return -1;
        vals[11] = PyObject_CallOneArg(c->json_object, text);
        Py_DECREF(text);
        if (!vals[11]) return -1;
    }
    if (b->updated_same) vals[12] = Py_NewRef(vals[4]);
    else {
        if (!(vals[12] = utc_object(&b->updated))) return -1;
        int lt = PyObject_RichCompareBool(vals[12], vals[4], Py_LT);
        if (lt < 0) return -1;
        if (lt) Py_SETREF(vals[12], Py_NewRef(vals[4]));
    }
    if (b->ttl_null) vals[13] = Py_NewRef(Py_None);
    else if (!(vals[13] = PyFloat_FromDouble(b->ttl))) return -1;
    if (b->expires.null) vals[14] = Py_NewRef(Py_None);
    else if (!(vals[14] = utc_object(&b->expires))) return -1;
    return 0;
}

/* decode_row over a copied row: its (seq, entry), or NULL (declined, no error set, or
 * an error to raise). */
static PyObject *
decode_chunk_row(const chunk_t *ch, const brow_t *b, ctx_t *c)
{
    PyObject *vals[ENTRY_FIELDS] = {NULL};
    vals[0] = Py_NewRef(c->cat[b->cat]);
    if (b->memory_ascii) {
        /* strict UTF-8 of ASCII bytes is those bytes: the str made as the decoder would
         * make it, and its hash (what str's hash computes over its one-byte data) set */
        if ((Py_ssize_t)b->memory.len > c->max_memory) goto fail; /* not cut to 32 bits */
        if (!(vals[1] = PyUnicode_New(b->memory.len, 127))) goto fail;
        memcpy(PyUnicode_DATA(vals[1]), ch->arena + b->memory.off, b->memory.len);
#if PY_VERSION_HEX < 0x030F0000 /* PyASCIIObject's cached hash, as unicode_hash sets it */
        if (b->memory_hash != -1) ((PyASCIIObject *)vals[1])->hash = b->memory_hash;
#endif
    }
    else if (!(vals[1] = span_str(ch, b->memory)) || !short_enough(vals[1], c->max_memory))
        goto fail;
    if (c->hash_memory && PyObject_Hash(vals[1]) == -1) goto fail;
    if (!(vals[2] = ID_FROM_BYTES(b->id))) goto fail;
    if (!(vals[3] = span_converted(ch, b->tags, c->tags_of, &c->last_tags_text, &c->last_tags)))
        goto fail;
    if (!(vals[4] = utc_object(&b->created))) goto fail;
    vals[5] = b->rel == 1.0 ? Py_NewRef(c->one) : PyFloat_FromDouble(b->rel);
    if (!vals[5]) goto fail;
    if (!(vals[6] = PyLong_FromLongLong(b->access))) goto fail;
    vals[7] = Py_NewRef(b->validated ? Py_True : Py_False);
    if (!(vals[8] = span_converted(ch, b->ns, c->namespace_of, &c->last_ns_text, &c->last_ns)))
        goto fail;
    if (chunk_row_tail(ch, b, c, vals) < 0) goto fail;
    return row_pair(c, vals, b->seq);
fail:
    return row_declined(vals);
}

/* Days since 0001-01-01 of a proleptic Gregorian date (datetime's toordinal - 1). */
static int64_t
civil_days(int y, int m, int d)
{
    static const int before[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    int64_t y1 = y - 1;
    int leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    return y1 * 365 + y1 / 4 - y1 / 100 + y1 / 400 + before[m] + (m > 2 && leap) + d - 1;
}

static int64_t
utc_us(const utc_t *t)
{
    const int *f = t->f;
    return ((civil_days(f[0], f[1], f[2]) * 24 + f[3]) * 60 + f[4]) * 60 * 1000000LL +
           (int64_t)f[5] * 1000000 + f[6];
}

/* decode_chunk_row into the store c->cols: the row's (seq, slot), its text's UTF-8 and
 * fields written to a slot by c->api->put_raw (no str, no entry; the sparse fields'
 * objects made only for a row that has one), with decode_chunk_row's checks; NULL as
 * decode_chunk_row (declined, no error set, or an error to raise). */
static PyObject *
cols_chunk_row(const chunk_t *ch, const brow_t *b, ctx_t *c)
{
    PyObject *vals[ENTRY_FIELDS] = {NULL}, *extras = NULL, *num = NULL;
    const char *mem = ch->arena + b->memory.off;
    int ascii = b->memory_ascii;
    if (ascii) {
        if ((Py_ssize_t)b->memory.len > c->max_memory) goto fail;
    } else {
        Py_ssize_t chars = c->api->utf8_chars(mem, b->memory.len, &ascii);
        if (chars < 0 || chars > c->max_memory) goto fail; /* not UTF-8, or too long */
    }
    /* the sparse fields: objects only when one is not its default */
    if (!(vals[3] = span_converted(ch, b->tags, c->tags_of, &c->last_tags_text, &c->last_tags)))
        goto fail;
    if (!(vals[8] = span_converted(ch, b->ns, c->namespace_of, &c->last_ns_text, &c->last_ns)))
        goto fail;
    int plain = PyTuple_CheckExact(vals[3]) && PyTuple_GET_SIZE(vals[3]) == 0 &&
                PyTuple_CheckExact(vals[8]) && PyTuple_GET_SIZE(vals[8]) == 0 &&
                b->access == 0 && b->accessed.null && b->key_null && b->value_null &&
                b->updated_same && b->ttl_null && b->expires.null;
    if (!plain) {
        if (!(vals[4] = utc_object(&b->created))) goto fail;
        if (!(vals[6] = PyLong_FromLongLong(b->access))) goto fail;
        if (chunk_row_tail(ch, b, c, vals) < 0) goto fail;
        if (!(extras = PyTuple_Pack(10, vals[3], vals[6], vals[8], vals[9], vals[10], vals[11],
                                    vals[12], vals[13], vals[14], Py_None)))
            goto fail;
    }
    ec_raw_t raw = {
        .id = b->id,
        .created_us = utc_us(&b->created),
        .relevance = b->rel,
        .cat = c->cat_code[b->cat],
        .validated = b->validated,
        .text = mem,
        .len = b->memory.len,
        .ascii = ascii,
        .extras = extras,
    };
    num = c->api->put_raw(c->cols, &raw);
    Py_XDECREF(extras);
    extras = NULL;
    if (!num) goto fail;
    PyObject *seq = PyLong_FromLongLong(b->seq);
    PyObject *pair = seq ? PyTuple_Pack(2, seq, num) : NULL;
    Py_XDECREF(seq);
    Py_DECREF(num);
    for (int i = 0; i < ENTRY_FIELDS; i++) Py_CLEAR(vals[i]);
    return pair; /* NULL: a MemoryError, raised (the slot stays: the caller drops the store) */
fail:
    Py_XDECREF(extras);
    return row_declined(vals);
}

/* Stop the producer (if it still runs) and wait for it, the GIL released. */
static void
feed_join(feed_t *f, pthread_t th)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
}

static void
feed_free(feed_t *f)
{
    if (f->chunks) {
        for (int i = 0; i < f->nchunks; i++) free(f->chunks[i].arena);
        free(f->chunks);
    }
    free(f->uri);
    free(f->sql);
    free(f->ids);
    free(f->fold_buf);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

/* The rows through the producer thread: the list, None (declined), or NULL (an error
 * set); `started` is set to 0 when no thread could be started (nothing read: the caller
 * reads in one thread instead). */
/* Call `idle()` (the GIL held) while chunk k is not published and the read runs on,
 * until it returns false (nothing to do now: the caller waits) or the chunk comes:
 * 0, or -1 with its exception set. A true result means it did some work and may have
 * more; once it returned false, it is called again at the next wait only. */
static int
run_idle(feed_t *f, PyObject *idle, long long k)
{
    for (;;) {
        PyObject *r = PyObject_CallNoArgs(idle);
        if (!r) return -1;
        int more = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (more < 0) return -1;
        if (!more) return 0;
        pthread_mutex_lock(&f->mu);
        int ready = f->filled > k || f->status != P_RUNNING;
        pthread_mutex_unlock(&f->mu);
        if (ready) return 0;
    }
}

static PyObject *
read_threaded(const char *uri, const char *sql, ctx_t *c, PyObject *ids_out, PyObject *folds_out,
              PyObject *idle, PyObject *rows_out, PyObject *fold_buf, int *started)
{
    feed_t f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    *started = 0;
    f.uri = strdup(uri);
    f.sql = strdup(sql);
    f.nchunks = chunks_ahead_n;
    f.chunks = calloc((size_t)f.nchunks, sizeof(chunk_t));
    if (!f.uri || !f.sql || !f.chunks) {
        feed_free(&f);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < c->ncat; i++) {
        f.cat_text[i] = c->cat_text[i];
        f.cat_len[i] = c->cat_len[i];
    }
    f.ncat = c->ncat;
    f.max_seq = c->max_seq;
    f.max_ttl = c->max_ttl;
    f.hash_memory = c->hash_memory;
    f.check_ids = ids_out != NULL;
    f.id_lag = id_prefetch_on;
    f.ids_presize = ids_presize_on;
    f.fold_memory = f.fold_all = folds_out != NULL;
    f.fold_pairs = fold_pairs_on;
    f.column_values = column_values_on;
    f.fold_lanes = fold_lanes_on;
    f.fold_wide = fold_wide_on && fold_x512_ok;
    /* the rows' fold hashes in order (folds_out), grown by doubling */
    uint64_t *folds = NULL;
    size_t folds_cap = 0;
    /* with cols: each row's memory hash as the thread computed it (-1: none), in order,
     * handed on as rows_out.hashes (rows_texts sets them on the texts it makes) */
    int64_t *hashes = NULL;
    size_t hashes_cap = 0;
    /* rows_out: the caller's empty list, filled in place (its idle may read it) */
    PyObject *out = rows_out ? Py_NewRef(rows_out) : PyList_New(0);
    if (!out) {
        feed_free(&f);
        return NULL;
    }
    pthread_t th;
    if (f.fold_memory) {
        folds_cap = 4096;
        if (!(folds = malloc(folds_cap * sizeof *folds))) {
            Py_DECREF(out);
            feed_free(&f);
            return PyErr_NoMemory();
        }
    }
    if (pthread_create(&th, NULL, feed_run, &f) != 0) {
        free(folds);
        Py_DECREF(out);
        feed_free(&f);
        return Py_NewRef(Py_None); /* with *started 0 */
    }
    *started = 1;
    Py_ssize_t row = 0;
    for (long long k = 0;; k++) {
        /* wait for chunk k (or the end), the GIL released only if it must wait */
        pthread_mutex_lock(&f.mu);
        int ready = f.filled > k || f.status != P_RUNNING;
        if (!ready && idle) {
            /* the caller's own work (idle) in the time it would wait */
            pthread_mutex_unlock(&f.mu);
            if (run_idle(&f, idle, k) < 0) goto error;
            pthread_mutex_lock(&f.mu);
            ready = f.filled > k || f.status != P_RUNNING;
        }
        if (!ready) {
            pthread_mutex_unlock(&f.mu);
            Py_BEGIN_ALLOW_THREADS
            pthread_mutex_lock(&f.mu);
            while (f.filled <= k && f.status == P_RUNNING) pthread_cond_wait(&f.cv, &f.mu);
            pthread_mutex_unlock(&f.mu);
            Py_END_ALLOW_THREADS
            pthread_mutex_lock(&f.mu);
        }
        int have = f.filled > k, status = f.status;
        pthread_mutex_unlock(&f.mu);
        if (!have) {
            if (status == P_DONE) break;
            goto declined; /* a row declined or an SQLite error */
        }
        const chunk_t *ch = &f.chunks[k % f.nchunks];
        for (int i = 0; i < ch->nrows; i++) {
            if (++row % YIELD_ROWS == 0) {
                Py_BEGIN_ALLOW_THREADS
                Py_END_ALLOW_THREADS
                if (PyErr_CheckSignals() < 0) goto error;
            }
            PyObject *pair = c->cols ? cols_chunk_row(ch, &ch->rows[i], c)
                                     : decode_chunk_row(ch, &ch->rows[i], c);
            if (!pair) {
                if (PyErr_Occurred()) goto error;
                goto declined;
            }
            int failed = list_append_wide(out, pair);
            Py_DECREF(pair);
            if (failed) goto error;
            if (c->cols && c->hash_memory) {
                size_t n = (size_t)row - 1;
                if (n >= hashes_cap) {
                    size_t cap = hashes_cap ? 2 * hashes_cap : 4096;
                    int64_t *g = realloc(hashes, cap * sizeof *hashes);
                    if (!g) {
                        PyErr_NoMemory();
                        goto error;
                    }
                    hashes = g;
                    hashes_cap = cap;
                }
                hashes[n] = (int64_t)ch->rows[i].memory_hash;
            }
            if (folds) {
                size_t n = (size_t)row - 1; /* this row's place */
                if (n >= folds_cap) {
                    uint64_t *g = realloc(folds, 2 * folds_cap * sizeof *folds);
                    if (!g) {
                        PyErr_NoMemory();
                        goto error;
                    }
                    folds = g;
                    folds_cap *= 2;
                }
                folds[n] = ch->rows[i].fold;
            }
        }
        if (rows_out && PyList_GET_SIZE(out) != row) {
            PyErr_SetString(PyExc_RuntimeError, "read_entries: rows_out changed");
            goto error;
        }
        if (fold_buf && folds) {
            /* this chunk's folds after its rows: fold_buf holds 8 bytes a row of out */
            Py_ssize_t had = PyByteArray_GET_SIZE(fold_buf);
            Py_ssize_t add = (Py_ssize_t)ch->nrows * 8;
            if (had != (row - ch->nrows) * 8) {
                PyErr_SetString(PyExc_RuntimeError, "read_entries: fold_buf changed");
                goto error;
            }
            if (bytearray_grow_wide(fold_buf, had + add) < 0) goto error;
            memcpy(PyByteArray_AS_STRING(fold_buf) + had, folds + (row - ch->nrows),
                   (size_t)add);
        }
        /* give the chunk back */
        pthread_mutex_lock(&f.mu);
        f.taken++;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
    }
    /* every row read: the producer has ended (it published its last chunk), so its
     * id set is final; report it, a file with an id twice included */
    if (ids_out && f.check_ids && PyList_Append(ids_out, f.ids_dup ? Py_False : Py_True) < 0)
        goto error;
    if (hashes && rows_out) {
        /* (a list without the attribute: none handed on) */
        PyObject *b = PyBytes_FromStringAndSize((const char *)hashes,
                                                (Py_ssize_t)(row * sizeof *hashes));
        if (!b) goto error;
        int failed = PyObject_SetAttrString(out, "hashes", b);
        Py_DECREF(b);
        if (failed) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) goto error;
            PyErr_Clear();
        }
    }
    if (folds) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)folds, (Py_ssize_t)(row * sizeof *folds));
        if (!b) goto error;
        int failed = PyList_Append(folds_out, b);
        Py_DECREF(b);
        if (failed) goto error;
    }
    goto done;
declined:
    Py_SETREF(out, Py_NewRef(Py_None));
    goto done;
error:
    Py_CLEAR(out);
done:
    feed_join(&f, th);
    feed_free(&f);
    free(folds);
    free(hashes);
    return out;
}

PyDoc_STRVAR(read_entries_doc,
"read_entries(uri, sql, entry_type, fields, categories, tags_of, namespace_of,\n"
"             json_object, one, max_memory, max_key, max_ttl, max_seq,\n"
"             hash_memory=False, threaded=False, ids_out=None, folds_out=None,\n"
"             idle=None, rows_out=None, fold_buf=None, cols=None)\n"
"             -> list | None\n\n"
"Every row of `sql` (SELECT_ENTRIES, 16 columns) of the database at the read-only\n"
"`uri`, as (seq, entry) pairs in order, decoded as sqlite_format._decode_checked\n"
"decodes a fetched row; None at the first row it would decline or any SQLite error\n"
"(the caller then reads in Python). `categories` maps each category's value (str) to\n"
"its member; `fields` names entry_type's 15 slots in _entry._ENTRY_FIELDS' order.\n"
"`hash_memory` true: each entry's memory text has its hash computed (cached in the\n"
"str) as it is made, while its bytes are hot; the entries are the same either way.\n"
"`threaded` true: SQLite's steps run in a thread of their own without the GIL, each\n"
"row's columns copied into a chunk (at most 8 chunks of 256 rows), while this thread\n"
"builds the entries from the chunks; the same result (the thread is joined before\n"
"this returns or raises). Where no thread can be started, the one-thread read.\n"
"`ids_out` a list (threaded only): when every row was read, the thread also checked\n"
"the ids (a set of their 128 bits) and True (no id twice) or False is appended to\n"
"it; nothing is appended when the ids were not checked (one thread, no memory).\n"
"`folds_out` a list (threaded only): when every row was read, a bytes of 8 bytes a\n"
"row (native uint64, in the rows' order) is appended to it: each memory text's\n"
"fold_hash (the word overlap core's value, computed by the thread from the text's\n"
"bytes), 2**64-1 where it was not (a text not ASCII on CPython 3.13 and later);\n"
"nothing is appended by the one-thread read or a declined file.\n"
"`idle` a callable (threaded only): when the next chunk is not ready, idle() is\n"
"called (the GIL held) until it returns false or the chunk comes, before this thread\n"
"waits: the caller's own work in the time it would wait. An exception it raises is\n"
"raised by this call (the thread joined first); the entries are the same either way.\n"
"`rows_out` an empty list or list subclass (threaded only): the rows are appended to\n"
"it (list storage, no method called), and it is the\n"
"list returned (idle may read the rows read so far; it must not change the list);\n"
"`fold_buf` an empty bytearray (threaded, with folds_out): after each chunk's rows,\n"
"their folds (as folds_out's) are appended to it, 8 bytes a row of rows_out. Either\n"
"changed by anything else: RuntimeError. The one-thread read leaves both untouched.\n"
"`cols` an EntryColumns (threaded only, else ValueError; one of another build:\n"
"TypeError): each row's text (SQLite's UTF-8, checked strict) and fields are put\n"
"straight into a slot of it (the index extension's ec_api_t.put_raw; the sparse fields'\n"
"objects made only for a row with one) and the rows are (seq, slot) pairs: no str and\n"
"no entry per row; with hash_memory, the hashes the thread computed (8 bytes a row,\n"
"native int64, -1 for a text it did not hash) are set as rows_out's `hashes` when it\n"
"has that attribute. A declined file (None) or an error leaves the slots put so far in\n"
"cols: the caller drops that store. Where no thread can be started: None.\n"
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
    int threaded = 0;
    PyObject *ids_out = NULL, *folds_out = NULL, *idle = NULL, *rows_out = NULL,
             *fold_buf = NULL, *cols = NULL;
    ctx_t c;
    memset(&c, 0, sizeof c);
    if (!PyArg_ParseTuple(args, "ssO!O!O!OOOO!nndL|ppOOOOOO", &uri, &sql, &PyType_Type, &c.type,
                          &PyTuple_Type, &fields, &PyDict_Type, &categories, &c.tags_of,
                          &c.namespace_of, &c.json_object, &PyFloat_Type, &c.one,
                          &c.max_memory, &c.max_key, &c.max_ttl, &c.max_seq,
                          &c.hash_memory, &threaded, &ids_out, &folds_out, &idle, &rows_out,
                          &fold_buf, &cols))
        return NULL;
    if (cols == Py_None) cols = NULL;
    if (cols) {
        /* the store's interface, from the index's extension (imported by then: the
         * store was made by it) */
        const ec_api_t *api = PyCapsule_Import(EC_API_CAPSULE, 0);
        if (!api) return NULL;
        if (api->version != EC_API_VERSION || !Py_IS_TYPE(cols, api->type)) {
            PyErr_SetString(PyExc_TypeError, "read_entries: cols must be an EntryColumns");
            return NULL;
        }
        if (!threaded) {
            PyErr_SetString(PyExc_ValueError, "read_entries: cols needs threaded=True");
            return NULL;
        }
        c.cols = cols;
        c.api = api;
    }
    if (rows_out == Py_None) rows_out = NULL;
    if (rows_out && (!PyList_Check(rows_out) || PyList_GET_SIZE(rows_out) != 0)) {
        PyErr_SetString(PyExc_TypeError, "read_entries: rows_out must be an empty list or None");
        return NULL;
    }
    if (fold_buf == Py_None) fold_buf = NULL;
    if (fold_buf && (!PyByteArray_CheckExact(fold_buf) || PyByteArray_GET_SIZE(fold_buf) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "read_entries: fold_buf must be an empty bytearray or None");
        return NULL;
    }
    if (idle == Py_None) idle = NULL;
    if (idle && !PyCallable_Check(idle)) {
        PyErr_SetString(PyExc_TypeError, "read_entries: idle must be callable or None");
        return NULL;
    }
    if (ids_out == Py_None) ids_out = NULL;
    if (ids_out && !PyList_CheckExact(ids_out)) {
        PyErr_SetString(PyExc_TypeError, "read_entries: ids_out must be a list or None");
        return NULL;
    }
    if (folds_out == Py_None) folds_out = NULL;
    if (folds_out && !PyList_CheckExact(folds_out)) {
        PyErr_SetString(PyExc_TypeError, "read_entries: folds_out must be a list or None");
        return NULL;
    }
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
    /* a copy of our own: the caller's dict may change while idle, tags_of or
     * namespace_of run, and the thread reads the texts without the GIL */
    categories = PyDict_Copy(categories);
    if (!categories) return NULL;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(categories, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "read_entries: a category's value is not a str");
            Py_DECREF(categories);
            return NULL;
        }
        Py_ssize_t n;
        const char *t = PyUnicode_AsUTF8AndSize(k, &n); /* kept by the copy's key */
        if (!t) {
            Py_DECREF(categories);
            return NULL;
        }
        c.cat_text[c.ncat] = t;
        c.cat_len[c.ncat] = n;
        c.cat[c.ncat] = v;
        c.cat_code[c.ncat] = c.cols ? c.api->cat_code(c.cols, v) : 0;
        if (c.cat_code[c.ncat] < 0) {
            PyErr_SetString(PyExc_ValueError, "read_entries: a category the store has not");
            Py_DECREF(categories);
            return NULL;
        }
        c.ncat++;
    }
    /* the copy (categories) keeps the texts and members alive */
    Py_INCREF(c.type);
    if (threaded) {
        int started;
        PyObject *read = read_threaded(uri, sql, &c, ids_out, folds_out, idle, rows_out, fold_buf,
                                       &started);
        if (started || !read) {
            ctx_clear(&c);
            Py_DECREF(c.type);
            Py_DECREF(categories);
            return read;
        }
        Py_DECREF(read); /* no thread: read in this one */
        if (c.cols) { /* (entries, not slots: the caller reads in Python) */
            ctx_clear(&c);
            Py_DECREF(c.type);
            Py_DECREF(categories);
            return Py_NewRef(Py_None);
        }
    }
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
        int failed = list_append_wide(out, pair);
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

PyDoc_STRVAR(feed_cpu_s_doc,
"feed_cpu_s() -> float\n\n"
"The CPU seconds the split reader's threads (read_entries(..., threaded=True)) of this\n"
"process used in all, counted when each ends: the part of a read that runs beside the\n"
"caller's thread (for benchmarks). O(1).");

static PyObject *
feed_cpu_s(PyObject *self, PyObject *unused)
{
    double total;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&feed_cpu_mu);
    total = feed_cpu_total;
    pthread_mutex_unlock(&feed_cpu_mu);
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(total);
}

PyDoc_STRVAR(id_prefetch_doc,
"id_prefetch(on) -> bool\n\n"
"Whether the split reader's check of the ids (read_entries' ids_out) holds each id\n"
"back for the next 16 rows, its slot in the id table prefetched when it came\n"
"(True, the default), or puts it at once (False: the path before it; the same check).\n"
"Sets it for later reads (on: a bool) and returns what it was. TypeError for a\n"
"non-bool. O(1).");

static PyObject *
id_prefetch(PyObject *self, PyObject *on)
{
    return bool_knob(&id_prefetch_on, on, "id_prefetch: on must be a bool");
}

PyDoc_STRVAR(chunks_ahead_doc,
"chunks_ahead(n) -> int\n\n"
"How many chunks of 256 rows the split reader's thread may fill ahead of the caller\n"
"(a later read's; 64 by default, 8 before branch open27): with more, the thread reads\n"
"on while the caller runs its idle work (read_entries' idle) in steps longer than\n"
"the caller's share of a few chunks. Each chunk holds its rows' copied columns (~70\n"
"KiB) and an arena of their texts. Returns what it was. TypeError for a non-int,\n"
"ValueError outside 2 to 4096. O(1).");

static PyObject *
chunks_ahead(PyObject *self, PyObject *n)
{
    if (!PyLong_CheckExact(n)) {
        PyErr_SetString(PyExc_TypeError, "chunks_ahead: n must be an int");
        return NULL;
    }
    long v = PyLong_AsLong(n);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < 2 || v > CHUNKS_MAX) {
        PyErr_SetString(PyExc_ValueError, "chunks_ahead: n must be 2 to 4096");
        return NULL;
    }
    int was = chunks_ahead_n;
    chunks_ahead_n = (int)v;
    return PyLong_FromLong(was);
}

PyDoc_STRVAR(id_huge_doc,
"id_huge(on) -> bool\n\n"
"Whether the split reader's id table, from 2 MiB on, is 2 MiB aligned and asked of the\n"
"kernel as transparent huge pages (True, the default from branch open27), or calloc'd\n"
"(False: the path before; the same check). Sets it for later reads (on: a bool) and\n"
"returns what it was. TypeError for a non-bool. O(1).");

static PyObject *
id_huge(PyObject *self, PyObject *on)
{
    return bool_knob(&ids_huge_on, on, "id_huge: on must be a bool");
}

PyDoc_STRVAR(id_presize_doc,
"id_presize(on) -> bool\n\n"
"Whether the split reader sizes its id table once, for the rows its file's seq range\n"
"says (at most the file's bytes over 64), before the first row (True, the default\n"
"from branch open31), or grows it by doubling from 1,024 slots (False: the path\n"
"before; the same check). Sets it for later reads (on: a bool) and returns what it\n"
"was. TypeError for a non-bool. O(1).");

static PyObject *
id_presize(PyObject *self, PyObject *on)
{
    return bool_knob(&ids_presize_on, on, "id_presize: on must be a bool");
}

PyDoc_STRVAR(fold_pairs_doc,
"fold_pairs(on) -> bool\n\n"
"Whether the split reader computes the ASCII memory texts' fold hashes at each chunk's\n"
"end, two texts' chains interleaved (True, the default from branch open29), or one per\n"
"row as it copies it (False: the path before; the same values). Sets it for later reads\n"
"(on: a bool) and returns what it was. TypeError for a non-bool. O(1).");

static PyObject *
fold_pairs(PyObject *self, PyObject *on)
{
    return bool_knob(&fold_pairs_on, on, "fold_pairs: on must be a bool");
}

PyDoc_STRVAR(column_values_doc,
"column_values(on) -> bool\n\n"
"Whether the split reader's thread reads each row's columns through their sqlite3_value\n"
"(sqlite3_column_value once a column, then the sqlite3_value_* accessors: True, the\n"
"default from branch open52) or by a sqlite3_column_* call for each type, text, length\n"
"and number (False: the path before; the same rows). Sets it for later reads (on: a\n"
"bool) and returns what it was. TypeError for a non-bool. O(1).");

static PyObject *
column_values(PyObject *self, PyObject *on)
{
    return bool_knob(&column_values_on, on, "column_values: on must be a bool");
}

PyDoc_STRVAR(fold_lanes_doc,
"fold_lanes(on) -> bool\n\n"
"Whether the split reader computes a chunk's ASCII memory texts' fold hashes by\n"
"compacting their bytes first (folded, a whitespace run as one space) and running their\n"
"plain chains four at a time (True, the default from branch open52), or by\n"
"fold_pairs' two branching chains (False: the path before; the same values). Sets it\n"
"for later reads (on: a bool) and returns what it was. TypeError for a non-bool. O(1).");

static PyObject *
fold_lanes(PyObject *self, PyObject *on)
{
    return bool_knob(&fold_lanes_on, on, "fold_lanes: on must be a bool");
}

PyDoc_STRVAR(fold_many_doc,
"fold_many(texts, wide) -> list[int]\n\n"
"fold_hash of each of the ASCII bytes objects in the list texts, by the reader's four\n"
"lanes over the compacted bytes (for tests: each equals the word overlap core's\n"
"fold_hash of the text), compacted by AVX-512 when wide is True and the CPU has it (see\n"
"fold_wide()). TypeError for a non-list, an item not bytes or a non-bool wide,\n"
"ValueError for bytes not ASCII, OverflowError for 4 GiB of texts or more.\n"
"O(total length).");

PyDoc_STRVAR(fold_wide_doc,
"fold_wide(on=None) -> bool\n\n"
"Whether the reader compacts the texts it folds by AVX-512 (fold_lanes; only where this\n"
"CPU has AVX-512 BW and VBMI2 and the build has the code: the default there) or by the\n"
"branch-free loop (every other CPU's path; the same values). With on (a bool), sets it\n"
"for later reads and fold_many calls (True: only where the CPU has it) and returns what\n"
"it was; without, returns it. TypeError for a non-bool. O(1).");

static PyObject *
fold_wide_get(PyObject *self, PyObject *args)
{
    PyObject *on = Py_None;
    if (!PyArg_ParseTuple(args, "|O:fold_wide", &on)) return NULL;
    if (on == Py_None) return PyBool_FromLong(fold_wide_on);
    PyObject *was = bool_knob(&fold_wide_on, on, "fold_wide: on must be a bool");
    fold_wide_on = fold_wide_on && fold_x512_ok;
    return was;
}

static PyObject *
fold_many(PyObject *self, PyObject *args)
{
    PyObject *texts, *wide_obj;
    if (!PyArg_ParseTuple(args, "OO:fold_many", &texts, &wide_obj)) return NULL;
    if (!PyBool_Check(wide_obj)) {
        PyErr_SetString(PyExc_TypeError, "fold_many: wide must be a bool");
        return NULL;
    }
    int wide = wide_obj == Py_True && fold_x512_ok;
    if (!PyList_CheckExact(texts)) {
        PyErr_SetString(PyExc_TypeError, "fold_many: texts must be a list");
        return NULL;
    }
    Py_ssize_t k = PyList_GET_SIZE(texts);
    size_t total = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *t = PyList_GET_ITEM(texts, i);
        if (!PyBytes_CheckExact(t)) {
            PyErr_SetString(PyExc_TypeError, "fold_many: each text must be bytes");
            return NULL;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(t);
        for (Py_ssize_t j = 0; j < PyBytes_GET_SIZE(t); j++) {
            if (p[j] >= 0x80) {
                PyErr_SetString(PyExc_ValueError, "fold_many: bytes not ASCII");
                return NULL;
            }
        }
        total += (size_t)PyBytes_GET_SIZE(t);
        if (total > UINT32_MAX) { /* fold_hash_ascii_many keeps 32-bit offsets */
            PyErr_SetString(PyExc_OverflowError, "fold_many: 4 GiB of texts or more");
            return NULL;
        }
    }
    const unsigned char **s = PyMem_Malloc(sizeof(*s) * (size_t)(k ? k : 1));
    size_t *n = PyMem_Malloc(sizeof(*n) * (size_t)(k ? k : 1));
    uint64_t *out = PyMem_Malloc(sizeof(*out) * (size_t)(k ? k : 1));
    unsigned char *buf = PyMem_Malloc(total + 64);
    PyObject *r = NULL;
    if (!s || !n || !out || !buf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *t = PyList_GET_ITEM(texts, i);
        s[i] = (const unsigned char *)PyBytes_AS_STRING(t);
        n[i] = (size_t)PyBytes_GET_SIZE(t);
    }
    fold_hash_ascii_many(s, n, (size_t)k, out, fold_tab, buf, wide);
    r = PyList_New(k);
    for (Py_ssize_t i = 0; r && i < k; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)fold_hash_final(out[i]));
        if (!v) {
            Py_CLEAR(r);
            break;
        }
        PyList_SET_ITEM(r, i, v);
    }
done:
    PyMem_Free(s);
    PyMem_Free(n);
    PyMem_Free(out);
    PyMem_Free(buf);
    return r;
}

PyDoc_STRVAR(fold_pair_doc,
"fold_pair(a, b) -> (int, int)\n\n"
"fold_hash of the ASCII bytes a and of b, by the reader's interleaved pair of chains\n"
"(for tests: each equals the word overlap core's fold_hash of the text). ValueError\n"
"for bytes not ASCII. O(len(a) + len(b)).");

static PyObject *
fold_pair(PyObject *self, PyObject *args)
{
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*:fold_pair", &a, &b)) return NULL;
    PyObject *r = NULL;
    int ascii = 1;
    for (Py_ssize_t i = 0; i < a.len; i++) ascii &= ((const unsigned char *)a.buf)[i] < 0x80;
    for (Py_ssize_t i = 0; i < b.len; i++) ascii &= ((const unsigned char *)b.buf)[i] < 0x80;
    if (!ascii) {
        PyErr_SetString(PyExc_ValueError, "fold_pair: bytes not ASCII");
    } else {
        uint64_t h1, h2;
        fold_hash_ascii_pair(a.buf, (size_t)a.len, &h1, b.buf, (size_t)b.len, &h2, fold_tab);
        r = Py_BuildValue("(KK)", (unsigned long long)fold_hash_final(h1),
                          (unsigned long long)fold_hash_final(h2));
    }
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    return r;
}

PyDoc_STRVAR(feed_wait_s_doc,
"feed_wait_s() -> float\n\n"
"The wall seconds every split reader's thread of this process waited with all its\n"
"chunks full (the caller behind), summed over the reads that ended (for benchmarks).");

static PyObject *
feed_wait_s(PyObject *self, PyObject *unused)
{
    double total;
    pthread_mutex_lock(&feed_cpu_mu);
    total = feed_wait_total;
    pthread_mutex_unlock(&feed_cpu_mu);
    return PyFloat_FromDouble(total);
}

static PyMethodDef methods[] = {
    {"chunks_ahead", chunks_ahead, METH_O, chunks_ahead_doc},
    {"feed_cpu_s", feed_cpu_s, METH_NOARGS, feed_cpu_s_doc},
    {"feed_wait_s", feed_wait_s, METH_NOARGS, feed_wait_s_doc},
    {"column_values", column_values, METH_O, column_values_doc},
    {"fold_lanes", fold_lanes, METH_O, fold_lanes_doc},
    {"fold_many", fold_many, METH_VARARGS, fold_many_doc},
    {"fold_wide", fold_wide_get, METH_VARARGS, fold_wide_doc},
    {"fold_pair", fold_pair, METH_VARARGS, fold_pair_doc},
    {"fold_pairs", fold_pairs, METH_O, fold_pairs_doc},
    {"id_huge", id_huge, METH_O, id_huge_doc},
    {"id_presize", id_presize, METH_O, id_presize_doc},
    {"id_prefetch", id_prefetch, METH_O, id_prefetch_doc},
    {"read_entries", read_entries, METH_VARARGS, read_entries_doc},
    {"source_id", source_id, METH_NOARGS, source_id_doc},
    {"same_library", same_library, METH_VARARGS, same_library_doc},
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
    fold_hash_table_init(fold_tab);
#ifdef FOLD_HAVE_X512
    fold_wide_on = fold_x512_ok = fold_x512_usable();
#endif
    if (hash_bytes_agree() < 0) return NULL;
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    return PyModule_Create(&module);
}
