/* Buffer helpers shared by the compiled index modules (_ckernels.c, _cbm25.c,
 * _cwordoverlap.c): the element kinds they accept, the format check, taking a 1-D
 * C-contiguous buffer with a ValueError that names the argument, and the array.array
 * type. Included after <Python.h>; everything is `static inline`, so a module that
 * does not use a helper gets no copy of it and no unused-function warning.
 */
#ifndef ACTORMEM_KERNELS_COMMON_H
#define ACTORMEM_KERNELS_COMMON_H

#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <structmember.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* The offset of `type`'s slot `name` of member type `kind` and `size` bytes (a member
 * descriptor, not read-restricted, inside the instance, of `type` or a base of it: a
 * descriptor of another class set as a class attribute names an offset in that class's
 * layout, not this one's), or 0 (no such slot; no error set). slot_offset: an object
 * slot (T_OBJECT_EX). */
static inline Py_ssize_t
slot_offset_of(PyTypeObject *type, PyObject *name, int kind, Py_ssize_t size)
{
    PyObject *d = PyObject_GetAttr((PyObject *)type, name);
    Py_ssize_t off = 0;
    if (!d) {
        PyErr_Clear();
        return 0;
    }
    if (Py_IS_TYPE(d, &PyMemberDescr_Type) &&
        PyType_IsSubtype(type, ((PyDescrObject *)d)->d_type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == kind && !(m->flags & READ_RESTRICTED) && m->offset > 0 &&
            m->offset + size <= type->tp_basicsize) {
            off = m->offset;
        }
    }
    Py_DECREF(d);
    return off;
}

static inline Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    return slot_offset_of(type, name, T_OBJECT_EX, (Py_ssize_t)sizeof(PyObject *));
}

/* slot_offset for an int64 field (a member descriptor of T_LONGLONG: the compiled
 * Record's born/died/seq/slot), or 0. */
static inline Py_ssize_t
slot_offset_i64(PyTypeObject *type, PyObject *name)
{
    return slot_offset_of(type, name, T_LONGLONG, (Py_ssize_t)sizeof(int64_t));
}

/* The fields of 'YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00' at `p` (`n` bytes) into `f`
 * (year, month, day, hour, minute, second, microsecond): 1, or 0 for any other text
 * (other lengths, offsets, separators or digits). The ranges are left to the datetime
 * constructor. O(1). */
static inline int
utc_fields(const char *p, Py_ssize_t n, int f[7])
{
    static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddddd";
    if (n != 25 && n != 32) return 0;
    Py_ssize_t body = n - 6;
    for (Py_ssize_t i = 0; i < body; i++) {
        char c = pattern[i];
        if (c == 'd' ? (p[i] < '0' || p[i] > '9') : p[i] != c) return 0;
    }
    if (memcmp(p + body, "+00:00", 6) != 0) return 0;
    f[0] = 0;
    for (int i = 0; i < 4; i++) f[0] = f[0] * 10 + (p[i] - '0');
    f[1] = (p[5] - '0') * 10 + (p[6] - '0');
    f[2] = (p[8] - '0') * 10 + (p[9] - '0');
    f[3] = (p[11] - '0') * 10 + (p[12] - '0');
    f[4] = (p[14] - '0') * 10 + (p[15] - '0');
    f[5] = (p[17] - '0') * 10 + (p[18] - '0');
    f[6] = 0;
    if (n == 32) {
        for (int i = 20; i < 26; i++) f[6] = f[6] * 10 + (p[i] - '0');
    }
    return 1;
}

/* The canonical UUID text at `p` (36 bytes: '-' at 8, 13, 18, 23, lower-case hex digits
 * elsewhere, what f"{ident:032x}" round-trips) as its 32 digits and a NUL in `hex`: 1,
 * or 0 for anything else. O(1). */
static inline int
uuid_digits(const char *p, Py_ssize_t n, char hex[33])
{
    if (n != 36) return 0;
    int h = 0;
    for (int i = 0; i < 36; i++) {
        char c = p[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return 0;
            continue;
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
        hex[h++] = c;
    }
    hex[32] = '\0';
    return 1;
}

/* Element kinds: int32, uint8, uint16, int64, uint64, float64, bool (bytes or bool),
 * term frequencies (uint8 or int32). */
enum kind { K_I32, K_U8, K_U16, K_I64, K_U64, K_F64, K_BOOL, K_TF };

/* The buffer's one-character format after any '@', '=' or '<' prefix; 0 if it is not
 * a single character. */
static inline char
fmt_char(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    while (*f == '@' || *f == '=' || *f == '<') {
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0') {
        return 0;
    }
    return f[0];
}

/* Whether the elements of `v` are of kind `k` (format and item size; not the shape). */
static inline int
kind_ok(const Py_buffer *v, enum kind k)
{
    char c = fmt_char(v);
    int i32 = v->itemsize == 4 && (c == 'i' || (c == 'l' && sizeof(long) == 4));
    switch (k) {
    case K_I32:
        return i32;
    case K_U8:
        return v->itemsize == 1 && c == 'B';
    case K_BOOL:
        return v->itemsize == 1 && (c == '?' || c == 'B');
    case K_U16:
        return v->itemsize == 2 && c == 'H';
    case K_I64:
        return v->itemsize == 8 && (c == 'q' || c == 'l');
    case K_U64:
        return v->itemsize == 8 && (c == 'Q' || c == 'L');
    case K_F64:
        return v->itemsize == 8 && c == 'd';
    case K_TF: /* term frequencies: bytes or int32 */
        return (v->itemsize == 1 && c == 'B') || i32;
    }
    return 0;
}

/* 0 when the first element of `v` sits at a multiple of its item size, or `v` is
 * empty; else -1 with a ValueError naming `name` (the buffer is not released). The kinds here are read as C
 * ints and doubles, and reading a misaligned one is undefined behaviour: a numpy view
 * at an odd byte offset (np.frombuffer(data, np.int64, offset=1), a slice of a uint8
 * array viewed as wider items) is refused before anything is read. With a 1-D
 * C-contiguous buffer every element is then aligned. For an item size that is a power
 * of two (every kind here). O(1). */
static inline int
check_aligned(const Py_buffer *v, const char *name)
{
    /* the item sizes of the kinds here are powers of two: a mask, not a division. An
     * empty buffer has nothing to read and may point anywhere: an empty array('i')
     * exports a static one-byte string. */
    if (v->len > 0 && v->itemsize > 1 &&
        ((uintptr_t)v->buf & (uintptr_t)(v->itemsize - 1)) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: misaligned buffer (its %zd-byte items must start at a multiple of "
                     "%zd bytes; pass a copy)",
                     name, v->itemsize, v->itemsize);
        return -1;
    }
    return 0;
}

/* Get a 1-D C-contiguous, aligned buffer of `o` of kind `k`; on failure set a
 * ValueError naming `name` and return -1 (nothing to release). */
static inline int
get(PyObject *o, Py_buffer *v, enum kind k, int writable, const char *name)
{
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, v, flags) < 0) {
        PyErr_Format(PyExc_ValueError, "%s: not a contiguous%s buffer", name,
                     writable ? " writable" : "");
        return -1;
    }
    if (v->ndim != 1 || !kind_ok(v, k)) {
        PyErr_Format(PyExc_ValueError, "%s: wrong element type or shape", name);
        PyBuffer_Release(v);
        return -1;
    }
    if (check_aligned(v, name) < 0) {
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* The number of elements of a Py_buffer. */
#define LEN(v) ((v).len / (v).itemsize)

/* Term frequency i of a K_TF buffer, as a double. */
static inline double
tf_at(const Py_buffer *tfs, Py_ssize_t i)
{
    if (tfs->itemsize == 1) {
        return (double)((const uint8_t *)tfs->buf)[i];
    }
    return (double)((const int32_t *)tfs->buf)[i];
}

/* array.array (a new reference), or NULL with the import error set. */
static inline PyObject *
import_array_type(void)
{
    PyObject *mod = PyImport_ImportModule("array");
    if (!mod) return NULL;
    PyObject *type = PyObject_GetAttrString(mod, "array");
    Py_DECREF(mod);
    return type;
}

/* Transparent huge pages for a long-lived array that is read at random (a TLB miss
 * per read with 4 KiB pages once it outgrows the TLB's reach). HUGE_PAGE_BYTES: the
 * x86-64 huge page. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

/* Ask the kernel (madvise MADV_HUGEPAGE, or `advice`) for huge pages on the whole 2 MiB
 * pages inside [p, p + bytes): the range is aligned inward, so memory shared with
 * another allocation at either end is never advised. A hint only: pages faulted in
 * afterwards come huge, the ones already there wait for khugepaged. Returns the bytes
 * advised: 0 when no whole huge page fits, when madvise refused (old kernel, THP off,
 * an invalid advice; errno is left as it was) or off Linux. O(1) (a system call). */
static inline size_t
huge_advise(void *p, size_t bytes, int advice)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE_BYTES - 1);
    if ((uintptr_t)p + bytes < (uintptr_t)p || hi <= lo) return 0;
    int saved = errno;
    int r = madvise((void *)lo, hi - lo, advice);
    errno = saved;
    return r == 0 ? (size_t)(hi - lo) : 0;
#else
    (void)p;
    (void)bytes;
    (void)advice;
    return 0;
#endif
}

/* Lists a C loop appends a million items to (an open's rows, records, relevance keys,
 * a namespace's records, a common gram's ids) grow by doubling from LIST_WIDE_FROM
 * items on: PyList_Append's own growth (about 1/8 more each time) re-copies the
 * whole array ~8 times over on its way to 1M pointers, and glibc's realloc of a chunk
 * in the heap is a fresh allocation, a memcpy and a free (open31's profile of a 1M
 * open: ~0.15 s of the open's thread in those copies). Capacity past the items is
 * only address space until written. */
#define LIST_WIDE_FROM 4096

/* Room for at least `need` items in `list` (a list or a list subclass: its own
 * storage, as list_resize keeps it, through PyMem_Realloc like it). 0, or -1 with
 * MemoryError set. O(len(list)) when it moves the items. */
static inline int
list_reserve(PyObject *list, Py_ssize_t need)
{
    PyListObject *l = (PyListObject *)list;
    if (need <= l->allocated) return 0;
    if ((size_t)need > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject *)) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PyMem_Realloc(l->ob_item, (size_t)need * sizeof(PyObject *));
    if (!items) {
        PyErr_NoMemory();
        return -1;
    }
    l->ob_item = items;
    l->allocated = need;
    return 0;
}

/* PyList_Append (the same list, the same error), the room doubled when a list of at
 * least LIST_WIDE_FROM items is full. `list` must pass PyList_Check. */
static inline int
list_append_wide(PyObject *list, PyObject *item)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n >= LIST_WIDE_FROM && n == ((PyListObject *)list)->allocated &&
        n <= PY_SSIZE_T_MAX / 2 && list_reserve(list, 2 * n) < 0) {
        return -1;
    }
    return PyList_Append(list, item);
}

/* PyByteArray_Resize(buf, size) for a bytearray grown a little at a time (the open's
 * fold hashes, 8 bytes a row): from LIST_WIDE_FROM * 8 bytes on, a resize past the
 * room first asks for twice `size` and then sets `size`, which PyByteArray_Resize
 * keeps without moving (a size of at least half the room), instead of its own
 * growth by about 1/8. The same bytes and size. 0, or -1 with an error set. */
static inline int
bytearray_grow_wide(PyObject *buf, Py_ssize_t size)
{
    Py_ssize_t had = PyByteArray_GET_SIZE(buf);
    if (size > had && had >= LIST_WIDE_FROM * 8 && size < PY_SSIZE_T_MAX / 2 - 1 &&
        size + 1 > ((PyByteArrayObject *)buf)->ob_alloc &&
        PyByteArray_Resize(buf, 2 * size) < 0) {
        return -1;
    }
    return PyByteArray_Resize(buf, size);
}

/* A knob's setter: *knob set from `on` (a bool, else TypeError `refusal`), what it was
 * returned as a bool. O(1). */
static inline PyObject *
bool_knob(int *knob, PyObject *on, const char *refusal)
{
    if (!PyBool_Check(on)) {
        PyErr_SetString(PyExc_TypeError, refusal);
        return NULL;
    }
    int was = *knob;
    *knob = on == Py_True;
    return PyBool_FromLong(was);
}

/* ---- CPython version differences (3.11 to 3.13; 3.14's public names where it has them) ----
 * Every call below compiles against each supported version's headers with no implicit
 * declaration (setup.py passes -Werror=implicit-function-declaration: a function missing
 * from a version's headers fails the build, whose module is then skipped, rather than
 * returning a truncated int). */

/* str's hash of a one-byte-kind (Latin-1, here ASCII) str's data, which is also
 * hash(bytes) of the same bytes: CPython hashes both with _Py_HashBytes. Reads the
 * process's hash secret only: callable without the GIL. 3.14 has it public as
 * Py_HashBuffer; 3.13 moved _Py_HashBytes's declaration to internal/pycore_pyhash.h
 * but still exports it (PyAPI_FUNC, "for the _datetime shared extension"), so it is
 * declared here with that header's prototype; 3.11 and 3.12 declare it in pyhash.h.
 * hash_bytes_agree() checks at import that it equals str's hash. O(n). */
#if PY_VERSION_HEX >= 0x030E0000
#define AM_HASH_BYTES(p, n) Py_HashBuffer((p), (Py_ssize_t)(n))
#else
#if PY_VERSION_HEX >= 0x030D0000
PyAPI_FUNC(Py_hash_t) _Py_HashBytes(const void *, Py_ssize_t);
#endif
#define AM_HASH_BYTES(p, n) _Py_HashBytes((p), (Py_ssize_t)(n))
#endif

/* 0 when AM_HASH_BYTES gives hash(str) for ASCII strs of lengths 0 to 40 (short and
 * long inputs both, as str's hash would take a small-string path), else -1 with
 * ImportError set: a module whose cached str hashes would differ from Python's must
 * not load (the package then runs its Python path). */
static inline int
hash_bytes_agree(void)
{
    char buf[41];
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < n; i++) buf[i] = (char)('a' + (i * 7 + n) % 26);
        PyObject *s = PyUnicode_FromStringAndSize(buf, n);
        if (!s) return -1;
        Py_hash_t want = PyObject_Hash(s);
        Py_DECREF(s);
        if (want == -1 && PyErr_Occurred()) return -1;
        if (AM_HASH_BYTES(buf, n) != want) {
            PyErr_SetString(PyExc_ImportError,
                            "this Python's str hash is not the bytes hash the module computes");
            return -1;
        }
    }
    return 0;
}

/* An int's value as n unsigned bytes, little-endian (little_endian 1) or big-endian:
 * 0, or -1 with OverflowError set when v is negative or needs more than n bytes (the
 * bytes then undefined), TypeError when v is not an int. 3.13 on: the public
 * PyLong_AsNativeBytes (3.13 added a sixth argument to _PyLong_AsByteArray). O(n). */
static inline int
long_to_unsigned_bytes(PyObject *v, unsigned char *b, size_t n, int little_endian)
{
#if PY_VERSION_HEX >= 0x030D0000
    int flags = (little_endian ? Py_ASNATIVEBYTES_LITTLE_ENDIAN : Py_ASNATIVEBYTES_BIG_ENDIAN) |
                Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE;
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "an integer is required");
        return -1;
    }
    Py_ssize_t need = PyLong_AsNativeBytes(v, b, (Py_ssize_t)n, flags);
    if (need < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -1;
        PyErr_Clear(); /* REJECT_NEGATIVE's ValueError: _PyLong_AsByteArray's error */
        PyErr_SetString(PyExc_OverflowError, "can't convert negative int to unsigned");
        return -1;
    }
    if ((size_t)need > n) {
        PyErr_SetString(PyExc_OverflowError, "int too big to convert");
        return -1;
    }
    return 0;
#else
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "an integer is required");
        return -1;
    }
    return _PyLong_AsByteArray((PyLongObject *)v, b, n, little_endian, 0);
#endif
}

/* The non-negative int whose value is the n bytes at b, little-endian (little_endian 1)
 * or big-endian; NULL with MemoryError. 3.13 on: the public
 * PyLong_FromUnsignedNativeBytes. O(n). */
static inline PyObject *
long_from_unsigned_bytes(const unsigned char *b, size_t n, int little_endian)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(
        b, n, (little_endian ? Py_ASNATIVEBYTES_LITTLE_ENDIAN : Py_ASNATIVEBYTES_BIG_ENDIAN) |
                  Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
#else
    return _PyLong_FromByteArray(b, n, little_endian, 0);
#endif
}

#endif /* ACTORMEM_KERNELS_COMMON_H */
