/* The EntryColumns store's C interface for another extension (the row reader,
 * actormem/_storage/_crows.c): one entry's fields as SQLite's columns give them put in a
 * slot with no Python object made but the sparse ones (issue #20, item 6: the open's
 * rows written straight into the store). Exported by _cwordoverlap as the capsule
 * "actormem._index._cwordoverlap._entrycols_api" (ec_api_t below); a caller checks
 * `version` and that a store it is given is of `type` before calling `put_raw`. */
#ifndef ACTORMEM_ENTRYCOLS_API_H
#define ACTORMEM_ENTRYCOLS_API_H

#include <Python.h>
#include <stdint.h>

#define EC_API_CAPSULE "actormem._index._cwordoverlap._entrycols_api"
#define EC_API_VERSION 1

/* One entry's fields for put_raw. */
typedef struct {
    const unsigned char *id; /* the id's 128 bits, 16 bytes big-endian */
    int64_t created_us;      /* created_at: µs since 0001-01-01T00:00:00 UTC (fold 0) */
    double relevance;        /* in [0, 1] */
    int cat;                 /* the category's code (its index in the store's categories) */
    int validated;           /* 0 or 1 */
    const char *text;        /* the memory text's UTF-8 */
    Py_ssize_t len;          /* its bytes */
    /* 1: the text is known ASCII, 0: known valid UTF-8 that is not ASCII (both as the
     * caller checked it), -1: not checked (put_raw checks it: ValueError if invalid) */
    int ascii;
    /* NULL, or the entry's sparse fields (borrowed): a tuple of the store's ten extras,
     * (tags, access_count, namespace, last_accessed, key, value, updated_at, ttl,
     * expires_at, None), when any differs from its default (the empty tuples, the int 0,
     * None, updated_at the created_at object); NULL means every one is its default */
    PyObject *extras;
} ec_raw_t;

typedef struct {
    int version;
    PyTypeObject *type; /* EntryColumns */
    /* The slot number stored (a new reference), or NULL with an exception (TypeError,
     * ValueError: a field out of its range, text not UTF-8; MemoryError), the store as
     * it was. The GIL held. O(len). */
    PyObject *(*put_raw)(PyObject *cols, const ec_raw_t *raw);
    /* Whether p[0:n] is strict UTF-8 (no surrogate, no overlong form, nothing past
     * U+10FFFF): its code points' count, or -1; *ascii set to whether every byte is
     * below 0x80. No GIL needed. O(n). */
    Py_ssize_t (*utf8_chars)(const char *p, Py_ssize_t n, int *ascii);
    /* The code of category member `cat` in the store (an EntryColumns): its index in
     * the store's categories, or -1 (not one of them, or not a store; no exception). */
    int (*cat_code)(PyObject *cols, PyObject *cat);
} ec_api_t;

#endif
