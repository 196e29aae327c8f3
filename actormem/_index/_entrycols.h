/* EntryColumns: stored entries as fixed-width slots plus UTF-8 text blocks, a
 * `MemoryEntry` built on read (issue #20, item 6, step A of docs/benchmarks.md's
 * "Bytes per entry, part 8"; branch cols28).
 *
 * Included by _cwordoverlap.c (it uses slot_offset from _kernels_common.h and the
 * datetime C API imported there). Each MemoryState keeps one; a record keeps its store
 * and slot number (`Record.cols`, `Record.slot`), and the C readers of records
 * (IdTable, GroupTable, store_inserts, load_inserts, add_groups_new, restore_columns,
 * encode_rows) read the slot (branches wire29-wip, wire30).
 *
 * Layout. A slot is 48 bytes: the id's 128 bits, created_at in microseconds since
 * 0001-01-01T00:00:00 UTC, the relevance (double), the text's block, offset and UTF-8
 * length, a category code and flags (live, ASCII text, validated, has extras). Slots
 * live in chunks that double in size (chunk k holds 64 << k slots), allocated once and
 * never moved or resized: an append never moves a slot another reader reads. Texts are
 * appended to blocks (4 KiB doubling to 1 MiB; a longer text gets a block of its own).
 * Every other field (tags, access count, namespace, last access, key, value, updated_at
 * when it is not created_at itself, ttl, expiry, and created_at when it is not an exact
 * UTC datetime with fold 0) is sparse: when any differs from its default the entry's
 * ten such values are kept as a tuple in a dict by slot number (the objects themselves,
 * so a read hands back the same tag tuple, payload, ...).
 *
 * Rules (the MVCC rules of part 8, for the owner that will call it): `put` writes every
 * field of a slot before the slot is marked live and its number returned (a record
 * published after it never sees a half-written slot); `release` is the owner's, once a
 * slot's record is purged (no snapshot reads it), and puts the slot on a free list that
 * `put` takes from first. A release may compact the text blocks (when over a quarter of
 * the bytes held are dead): texts move, slots do not; no method keeps a pointer into a
 * block across a call into Python, and everything runs under the GIL, so no reader sees
 * a move half done. Errors leave the store as it was.
 */

#include "_entrycols_api.h"

#define EC_FIRST_SHIFT 6 /* chunk 0 holds 64 slots */
#define EC_CHUNKS 40
#define EC_BLOCK_MIN 4096
#define EC_BLOCK_MAX (1u << 20)
#define EC_NO_BLOCK 0xFFFFFFFFu
#define EC_EXTRAS 10 /* tags, access_count, namespace, last_accessed, key, value,
                      * updated_at, ttl, expires_at, created_at */

enum { EC_LIVE = 1, EC_ASCII = 2, EC_VALIDATED = 4, EC_EXTRA = 8 };

typedef struct {
    uint64_t id_hi, id_lo;
    int64_t created; /* µs since 0001-01-01T00:00:00 UTC (0 when in the extras) */
    double relevance;
    uint32_t block, off, len; /* the text: block number, offset, UTF-8 bytes */
    uint8_t cat, flags;
    uint8_t pad[2];
} EcSlot;

typedef struct {
    char *data; /* NULL once freed (no live text left in it) */
    uint32_t cap, used;
    uint64_t live; /* bytes of live texts in it */
} EcBlock;

/* The entry's 15 slots, in _entry._ENTRY_FIELDS' order. */
enum {
    EF_CATEGORY, EF_MEMORY, EF_ID, EF_TAGS, EF_CREATED, EF_RELEVANCE, EF_COUNT,
    EF_VALIDATED, EF_NAMESPACE, EF_LAST, EF_KEY, EF_VALUE, EF_UPDATED, EF_TTL, EF_EXPIRES,
    EF_N
};

typedef struct {
    PyObject_HEAD
    PyTypeObject *entry_type;
    Py_ssize_t off[EF_N];
    PyObject *categories; /* tuple of the category members, by code */
    PyObject *names;      /* the 15 field names (the fields tuple given) */
    PyObject *extras;     /* dict: slot number -> tuple of EC_EXTRAS */
    PyObject *zero;       /* the int 0 an access count of the fixed slots reads */
    EcSlot *chunks[EC_CHUNKS];
    int nchunks;
    int64_t next;   /* slots ever handed out (the next new slot number) */
    int64_t nlive;
    int64_t *free;  /* released slot numbers, taken last-in first-out */
    int64_t nfree, free_cap;
    EcBlock *blocks;
    uint32_t nblocks, blocks_cap;
    uint64_t held, live_bytes; /* bytes used in blocks not freed; bytes of live texts */
    uint64_t compactions;
    int64_t fail_in; /* tests (_fail_put_in): the put that many puts on raises MemoryError */
    /* readers of the slots and texts outside the GIL (a digest's thread: pin(), and
     * the core's slots_* functions over their release of it): while any, every put,
     * release and compaction is refused (RuntimeError), so no text moves or changes
     * and the blocks' array is not reallocated under them (branch open42) */
    int64_t pins;
} EntryColumnsObject;

static PyTypeObject EntryColumns_Type;

static inline EcSlot *
ec_at(const EntryColumnsObject *c, int64_t s)
{
    uint64_t x = (uint64_t)s + (1u << EC_FIRST_SHIFT);
    int top = 63 - __builtin_clzll(x);
    int k = top - EC_FIRST_SHIFT;
    return &c->chunks[k][x - ((uint64_t)1 << top)];
}

/* The live slot of `c` a record names by its slot number at offset `off`: an int64
 * field (`i64`, the compiled Record) or an exact int object; NULL, no exception, for an
 * unset, odd or out-of-range number or a slot not live (the record's `cols` is `c`,
 * checked by the caller). */
static inline EcSlot *
ec_rec_slot(const EntryColumnsObject *c, PyObject *rec, Py_ssize_t off, int i64)
{
    long long s;
    if (i64) {
        s = *(const int64_t *)((const char *)rec + off);
    } else {
        PyObject *n = *(PyObject **)((char *)rec + off);
        int overflow = 0;
        if (!n || !PyLong_CheckExact(n)) return NULL;
        s = PyLong_AsLongLongAndOverflow(n, &overflow);
        if (overflow || (s == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return NULL;
        }
    }
    if (s < 0 || s >= c->next) return NULL;
    EcSlot *e = ec_at(c, s);
    return e->flags & EC_LIVE ? e : NULL;
}

/* The extras tuple of the slot numbered `slot` (a slot with EC_EXTRA): borrowed; NULL
 * with an error set when the dict lookup fails or the slot lost its extras. */
static PyObject *
ec_extras_of(EntryColumnsObject *c, PyObject *slot)
{
    PyObject *x = PyDict_GetItemWithError(c->extras, slot);
    if (!x && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "EntryColumns: a slot lost its extras");
    return x;
}

/* --- civil dates (proleptic Gregorian), as datetime's own toordinal/fromordinal */

static const int ec_before_month[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
static const int ec_days_in_month[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

static inline int
ec_leap(int y)
{
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

static int64_t
ec_days(int y, int m, int d) /* days since 0001-01-01 */
{
    int64_t y1 = y - 1;
    return y1 * 365 + y1 / 4 - y1 / 100 + y1 / 400 + ec_before_month[m] + (m > 2 && ec_leap(y)) +
           d - 1;
}

static void
ec_civil(int64_t n, int *y, int *m, int *d) /* n days since 0001-01-01 */
{
    int64_t n400 = n / 146097, r = n % 146097;
    int64_t year = n400 * 400 + 1;
    int64_t n100 = r / 36524;
    r %= 36524;
    int64_t n4 = r / 1461;
    r %= 1461;
    int64_t n1 = r / 365;
    r %= 365;
    year += n100 * 100 + n4 * 4 + n1;
    if (n1 == 4 || n100 == 4) {
        *y = (int)year - 1, *m = 12, *d = 31;
        return;
    }
    int leap = n1 == 3 && (n4 != 24 || n100 == 3);
    int month = (int)((r + 50) >> 5);
    int preceding = ec_before_month[month] + (month > 2 && leap);
    if (preceding > r) {
        month -= 1;
        preceding -= ec_days_in_month[month] + (month == 2 && leap);
    }
    *y = (int)year, *m = month, *d = (int)(r - preceding) + 1;
}

/* --- slots and blocks */

static int
ec_slot_arg(EntryColumnsObject *c, PyObject *arg, int64_t *out)
{
    if (!PyLong_CheckExact(arg)) {
        PyErr_Format(PyExc_TypeError, "slot must be an int, not %.100s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (s == -1 && PyErr_Occurred()) return -1;
    if (overflow || s < 0 || s >= c->next || !(ec_at(c, s)->flags & EC_LIVE)) {
        PyErr_SetString(PyExc_IndexError, "EntryColumns: no live slot of that number");
        return -1;
    }
    *out = s;
    return 0;
}

/* Room for `len` more text bytes: the block number and offset to write at (not yet
 * counted as used). -1 with MemoryError. */
static int
ec_room(EntryColumnsObject *c, uint32_t len, uint32_t *block, uint32_t *off)
{
    if (c->nblocks) {
        EcBlock *b = &c->blocks[c->nblocks - 1];
        if (b->data && b->cap - b->used >= len) {
            *block = c->nblocks - 1, *off = b->used;
            return 0;
        }
    }
    uint32_t cap = c->nblocks ? c->blocks[c->nblocks - 1].cap * 2 : EC_BLOCK_MIN;
    if (cap < EC_BLOCK_MIN) cap = EC_BLOCK_MIN;
    if (cap > EC_BLOCK_MAX) cap = EC_BLOCK_MAX;
    if (cap < len) cap = len;
    if (c->nblocks == c->blocks_cap) {
        uint32_t nc = c->blocks_cap ? c->blocks_cap * 2 : 8;
        EcBlock *nb = PyMem_Realloc(c->blocks, (size_t)nc * sizeof(EcBlock));
        if (!nb) {
            PyErr_NoMemory();
            return -1;
        }
        c->blocks = nb, c->blocks_cap = nc;
    }
    char *data = PyMem_Malloc(cap);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    c->blocks[c->nblocks] = (EcBlock){data, cap, 0, 0};
    *block = c->nblocks++, *off = 0;
    return 0;
}

static inline const char *
ec_text_ptr(const EntryColumnsObject *c, const EcSlot *s)
{
    return s->len ? c->blocks[s->block].data + s->off : "";
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define EC_LITTLE_ENDIAN 1 /* four UCS2 code points packed to their bytes by shifts */
#else
#define EC_LITTLE_ENDIAN 0
#endif

/* One code point of valid UTF-8 at *pp (before end), *pp moved past it; 0x110000 when
 * the bytes end first. */
static inline Py_UCS4
ec_utf8_next(const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    Py_ssize_t left = end - p;
    Py_UCS4 u = p[0];
    if (u < 0x80) {
        *pp = p + 1;
    } else if (u < 0xE0) {
        if (left < 2) return 0x110000;
        u = ((u & 0x1F) << 6) | (p[1] & 0x3F);
        *pp = p + 2;
    } else if (u < 0xF0) {
        if (left < 3) return 0x110000;
        u = ((u & 0x0F) << 12) | ((Py_UCS4)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        *pp = p + 3;
    } else {
        if (left < 4) return 0x110000;
        u = ((u & 0x07) << 18) | ((Py_UCS4)(p[1] & 0x3F) << 12) | ((Py_UCS4)(p[2] & 0x3F) << 6) |
            (p[3] & 0x3F);
        *pp = p + 4;
    }
    return u;
}

/* Whether the text of slot `s` (valid UTF-8: the store encoded it) holds the code points
 * of the ready str `t`: the bytes compared for an ASCII str, else the stored UTF-8
 * walked against `t`'s code points, eight (UCS1) or four (UCS2) ASCII ones at a time
 * (no UTF-8 of `t` made, nothing allocated, no code run). A str with a lone surrogate is
 * never equal (no stored text decodes to one). O(len(text)). */
static int
ec_text_is(const EntryColumnsObject *c, const EcSlot *s, PyObject *t)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(t);
    if (PyUnicode_IS_ASCII(t)) {
        return (s->flags & EC_ASCII) && (Py_ssize_t)s->len == n &&
               memcmp(ec_text_ptr(c, s), PyUnicode_1BYTE_DATA(t), s->len) == 0;
    }
    if ((s->flags & EC_ASCII) || (Py_ssize_t)s->len < n) return 0;
    const unsigned char *p = (const unsigned char *)ec_text_ptr(c, s), *end = p + s->len;
    int kind = PyUnicode_KIND(t);
    Py_ssize_t i = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(t);
        while (i < n) {
            if (i + 8 <= n && end - p >= 8) {
                uint64_t x, y;
                memcpy(&x, d + i, 8);
                memcpy(&y, p, 8);
                if (!(x & 0x8080808080808080ULL)) {
                    if (x != y) return 0;
                    i += 8, p += 8;
                    continue;
                }
            }
            if (p >= end || ec_utf8_next(&p, end) != d[i]) return 0;
            i++;
        }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *d = PyUnicode_2BYTE_DATA(t);
        while (i < n) {
            if (EC_LITTLE_ENDIAN && i + 4 <= n && end - p >= 4) {
                uint64_t x;
                uint32_t y;
                memcpy(&x, d + i, 8);
                memcpy(&y, p, 4);
                if (!(x & 0xFF80FF80FF80FF80ULL)) { /* four ASCII code points */
                    uint32_t b = (uint32_t)((x & 0xFF) | ((x >> 8) & 0xFF00) |
                                            ((x >> 16) & 0xFF0000) | ((x >> 24) & 0xFF000000));
                    if (b != y) return 0;
                    i += 4, p += 4;
                    continue;
                }
            }
            if (p >= end || ec_utf8_next(&p, end) != d[i]) return 0;
            i++;
        }
    } else {
        const Py_UCS4 *d = PyUnicode_4BYTE_DATA(t);
        for (; i < n; i++) {
            if (p >= end || ec_utf8_next(&p, end) != d[i]) return 0;
        }
    }
    return p == end;
}

/* Compact the text blocks: every live text copied, in slot order, into new blocks, the
 * old ones freed. -1 with MemoryError, the store unchanged. O(slots + live bytes). */
static int
ec_compact(EntryColumnsObject *c)
{
    EntryColumnsObject tmp = {0};
    for (int64_t i = 0; i < c->next; i++) {
        EcSlot *s = ec_at(c, i);
        if (!(s->flags & EC_LIVE) || !s->len) continue;
        uint32_t b, o;
        if (ec_room(&tmp, s->len, &b, &o) < 0) goto fail;
        memcpy(tmp.blocks[b].data + o, ec_text_ptr(c, s), s->len);
        tmp.blocks[b].used += s->len, tmp.blocks[b].live += s->len;
    }
    /* No failure past here: every slot moved to its place in the new blocks. */
    uint32_t nb = 0, no = 0;
    for (int64_t i = 0; i < c->next; i++) {
        EcSlot *s = ec_at(c, i);
        if (!(s->flags & EC_LIVE) || !s->len) continue;
        if (tmp.blocks[nb].used - no < s->len) nb++, no = 0;
        s->block = nb, s->off = no;
        no += s->len;
    }
    for (uint32_t i = 0; i < c->nblocks; i++) PyMem_Free(c->blocks[i].data);
    PyMem_Free(c->blocks);
    c->blocks = tmp.blocks, c->nblocks = tmp.nblocks, c->blocks_cap = tmp.blocks_cap;
    c->held = c->live_bytes;
    c->compactions++;
    return 0;
fail:
    for (uint32_t i = 0; i < tmp.nblocks; i++) PyMem_Free(tmp.blocks[i].data);
    PyMem_Free(tmp.blocks);
    return -1;
}

/* --- reading an entry's fields when stored */

static PyObject *
ec_field(EntryColumnsObject *c, PyObject *entry, int i)
{
    PyObject *v = *(PyObject **)((char *)entry + c->off[i]);
    if (!v) PyErr_SetString(PyExc_TypeError, "EntryColumns.put: the entry has an unset field");
    return v;
}

static int
ec_plain_time(PyObject *t)
{
    return PyDateTime_CheckExact(t) && PyDateTime_DATE_GET_TZINFO(t) == PyDateTime_TimeZone_UTC &&
           PyDateTime_DATE_GET_FOLD(t) == 0;
}

static int64_t
ec_time_us(PyObject *t)
{
    int64_t days = ec_days(PyDateTime_GET_YEAR(t), PyDateTime_GET_MONTH(t), PyDateTime_GET_DAY(t));
    return ((days * 24 + PyDateTime_DATE_GET_HOUR(t)) * 60 + PyDateTime_DATE_GET_MINUTE(t)) * 60 *
               1000000 +
           (int64_t)PyDateTime_DATE_GET_SECOND(t) * 1000000 + PyDateTime_DATE_GET_MICROSECOND(t);
}

static PyObject *
ec_time_of(int64_t us)
{
    int64_t days = us / 86400000000LL, r = us % 86400000000LL;
    int y, m, d;
    ec_civil(days, &y, &m, &d);
    int usec = (int)(r % 1000000);
    r /= 1000000;
    return PyDateTimeAPI->DateTime_FromDateAndTime(y, m, d, (int)(r / 3600), (int)(r / 60 % 60),
                                                   (int)(r % 60), usec, PyDateTime_TimeZone_UTC,
                                                   PyDateTimeAPI->DateTimeType);
}

/* The slot `s` (every field but block/off/LIVE set; EC_ASCII and EC_VALIDATED in
 * flags) stored with its text p[0:s->len] (valid UTF-8) and `extras` (a tuple of
 * EC_EXTRAS, or NULL: none), on the first released slot or a new one: its number (a new
 * reference), or NULL with an exception (MemoryError, OverflowError), the store as it
 * was. Every field is written before the slot is marked live. O(len). */
/* -1 with RuntimeError when a reader pinned the store (no put, release or compaction
 * then), else 0. */
static inline int
ec_unpinned(const EntryColumnsObject *c)
{
    if (!c->pins) return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "EntryColumns: pinned by a reader (no put, release or compaction meanwhile)");
    return -1;
}

static PyObject *
ec_put_slot(EntryColumnsObject *c, EcSlot s, const char *p, PyObject *extras)
{
    if (ec_unpinned(c) < 0) return NULL;
    if (c->fail_in && --c->fail_in == 0) {
        return PyErr_NoMemory(); /* _fail_put_in's: as an allocation below failing */
    }
    /* the slot number, its chunk */
    int64_t at = c->nfree ? c->free[c->nfree - 1] : c->next;
    if (!c->nfree) {
        uint64_t x = (uint64_t)at + (1u << EC_FIRST_SHIFT);
        int kk = 63 - __builtin_clzll(x) - EC_FIRST_SHIFT;
        if (kk >= EC_CHUNKS) {
            PyErr_SetString(PyExc_OverflowError, "EntryColumns: too many slots");
            return NULL;
        }
        if (kk == c->nchunks) {
            EcSlot *chunk = PyMem_Calloc((size_t)1 << (kk + EC_FIRST_SHIFT), sizeof(EcSlot));
            if (!chunk) {
                return PyErr_NoMemory();
            }
            c->chunks[c->nchunks++] = chunk;
        }
    }
    /* room for the text (a new block at most; an unused one is harmless) */
    if (s.len) {
        if (ec_room(c, s.len, &s.block, &s.off) < 0) {
            return NULL;
        }
    } else {
        s.block = EC_NO_BLOCK;
    }
    PyObject *num = PyLong_FromLongLong(at);
    if (!num) {
        return NULL;
    }
    if (extras) {
        if (PyDict_SetItem(c->extras, num, extras) < 0) {
            Py_DECREF(num);
            return NULL;
        }
        s.flags |= EC_EXTRA;
    }
    /* No failure past here. */
    if (s.len) {
        EcBlock *b = &c->blocks[s.block];
        memcpy(b->data + s.off, p, s.len);
        b->used += s.len, b->live += s.len;
        c->held += s.len, c->live_bytes += s.len;
    }
    if (c->nfree) c->nfree--;
    else c->next++;
    EcSlot *dst = ec_at(c, at);
    uint8_t flags = s.flags;
    s.flags = 0;
    *dst = s;
    dst->flags = flags | EC_LIVE; /* last: every field written before the slot is live */
    c->nlive++;
    return num;
}

PyDoc_STRVAR(ec_put_doc,
"put(entry) -> int\n\n"
"Store `entry` (an exact instance of the entry type given at construction, every slot\n"
"set: its id an int in [0, 2**128), its text a str, its relevance a float, its\n"
"validated a bool, its category one of the categories) and return its slot number.\n"
"A released slot is reused first. TypeError or ValueError for anything else, MemoryError\n"
"if a chunk or block cannot be allocated; the store unchanged on any error.\n"
"O(len(text)).");

static PyObject *
ec_put(EntryColumnsObject *c, PyObject *entry)
{
    if (!Py_IS_TYPE(entry, c->entry_type)) {
        PyErr_Format(PyExc_TypeError, "EntryColumns.put takes a %.100s, not %.100s",
                     c->entry_type->tp_name, Py_TYPE(entry)->tp_name);
        return NULL;
    }
    PyObject *v[EF_N];
    for (int i = 0; i < EF_N; i++)
        if (!(v[i] = ec_field(c, entry, i))) return NULL;
    EcSlot s = {0};
    /* category */
    Py_ssize_t ncat = PyTuple_GET_SIZE(c->categories), k = 0;
    while (k < ncat && PyTuple_GET_ITEM(c->categories, k) != v[EF_CATEGORY]) k++;
    if (k == ncat) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns.put: unknown category");
        return NULL;
    }
    s.cat = (uint8_t)k;
    /* id */
    if (!PyLong_CheckExact(v[EF_ID])) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns.put: the id must be an int");
        return NULL;
    }
    unsigned char raw[16];
    if (long_to_unsigned_bytes(v[EF_ID], raw, 16, 1) < 0) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "EntryColumns.put: the id is not in [0, 2**128)");
        }
        return NULL;
    }
    memcpy(&s.id_lo, raw, 8);
    memcpy(&s.id_hi, raw + 8, 8);
    /* relevance, validated */
    if (!PyFloat_CheckExact(v[EF_RELEVANCE])) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns.put: the relevance must be a float");
        return NULL;
    }
    s.relevance = PyFloat_AS_DOUBLE(v[EF_RELEVANCE]);
    if (v[EF_VALIDATED] != Py_True && v[EF_VALIDATED] != Py_False) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns.put: validated must be a bool");
        return NULL;
    }
    if (v[EF_VALIDATED] == Py_True) s.flags |= EC_VALIDATED;
    /* the sparse fields */
    PyObject *created = v[EF_CREATED];
    int plain_created = ec_plain_time(created);
    int extra = !plain_created ||
                !(PyTuple_CheckExact(v[EF_TAGS]) && PyTuple_GET_SIZE(v[EF_TAGS]) == 0) ||
                v[EF_COUNT] != c->zero || /* the cached 0 (any other int: in the extras) */
                !(PyTuple_CheckExact(v[EF_NAMESPACE]) && PyTuple_GET_SIZE(v[EF_NAMESPACE]) == 0) ||
                v[EF_LAST] != Py_None || v[EF_KEY] != Py_None || v[EF_VALUE] != Py_None ||
                v[EF_UPDATED] != created || v[EF_TTL] != Py_None || v[EF_EXPIRES] != Py_None;
    if (plain_created) s.created = ec_time_us(created);
    /* the text */
    PyObject *text = v[EF_MEMORY], *utf8 = NULL;
    if (!PyUnicode_CheckExact(text)) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns.put: the text must be a str");
        return NULL;
    }
    const char *p;
    Py_ssize_t n;
    if (PyUnicode_IS_ASCII(text)) {
        p = (const char *)PyUnicode_1BYTE_DATA(text), n = PyUnicode_GET_LENGTH(text);
        s.flags |= EC_ASCII;
    } else {
        if (!(utf8 = PyUnicode_AsUTF8String(text))) return NULL;
        p = PyBytes_AS_STRING(utf8), n = PyBytes_GET_SIZE(utf8);
    }
    if (n > 0x7FFFFFFF) {
        Py_XDECREF(utf8);
        PyErr_SetString(PyExc_ValueError, "EntryColumns.put: text too long");
        return NULL;
    }
    s.len = (uint32_t)n;
    PyObject *extras = NULL;
    if (extra &&
        !(extras = PyTuple_Pack(EC_EXTRAS, v[EF_TAGS], v[EF_COUNT], v[EF_NAMESPACE], v[EF_LAST],
                                v[EF_KEY], v[EF_VALUE], v[EF_UPDATED], v[EF_TTL], v[EF_EXPIRES],
                                plain_created ? Py_None : created))) {
        Py_XDECREF(utf8);
        return NULL;
    }
    PyObject *num = ec_put_slot(c, s, p, extras);
    Py_XDECREF(extras);
    Py_XDECREF(utf8);
    return num;
}

/* --- ec_api_t (_entrycols_api.h): a slot from the row reader's raw fields */

/* Strict UTF-8 (as PyUnicode_DecodeUTF8 "strict" accepts): p[0:n]'s code points, or -1;
 * *ascii whether every byte is below 0x80. */
static Py_ssize_t
ec_utf8_chars(const char *text, Py_ssize_t n, int *ascii)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + n;
    Py_ssize_t chars = 0;
    int all = 1;
    while (p < end) {
        if (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (!(w & 0x8080808080808080ULL)) {
                p += 8, chars += 8;
                continue;
            }
        }
        unsigned char b = *p;
        if (b < 0x80) {
            p++;
        } else {
            all = 0;
            Py_ssize_t left = end - p;
            if (b >= 0xC2 && b <= 0xDF) {
                if (left < 2 || (p[1] & 0xC0) != 0x80) return -1;
                p += 2;
            } else if (b >= 0xE0 && b <= 0xEF) {
                if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return -1;
                if (b == 0xE0 && p[1] < 0xA0) return -1; /* overlong */
                if (b == 0xED && p[1] >= 0xA0) return -1; /* a surrogate */
                p += 3;
            } else if (b >= 0xF0 && b <= 0xF4) {
                if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
                    (p[3] & 0xC0) != 0x80)
                    return -1;
                if (b == 0xF0 && p[1] < 0x90) return -1; /* overlong */
                if (b == 0xF4 && p[1] >= 0x90) return -1; /* past U+10FFFF */
                p += 4;
            } else {
                return -1;
            }
        }
        chars++;
    }
    *ascii = all;
    return chars;
}

/* The largest created_us: 9999-12-31T23:59:59.999999. */
#define EC_MAX_US (ec_days(9999, 12, 31) * 86400000000LL + 86399999999LL)

static PyObject *
ec_put_raw(PyObject *cols, const ec_raw_t *r)
{
    if (!Py_IS_TYPE(cols, &EntryColumns_Type)) {
        PyErr_SetString(PyExc_TypeError, "put_raw: not an EntryColumns");
        return NULL;
    }
    EntryColumnsObject *c = (EntryColumnsObject *)cols;
    if (r->cat < 0 || r->cat >= PyTuple_GET_SIZE(c->categories)) {
        PyErr_SetString(PyExc_ValueError, "put_raw: no category of that code");
        return NULL;
    }
    if (!(r->relevance >= 0.0 && r->relevance <= 1.0)) {
        PyErr_SetString(PyExc_ValueError, "put_raw: the relevance is not in [0, 1]");
        return NULL;
    }
    if (r->validated != 0 && r->validated != 1) {
        PyErr_SetString(PyExc_ValueError, "put_raw: validated must be 0 or 1");
        return NULL;
    }
    if (r->created_us < 0 || r->created_us > EC_MAX_US) {
        PyErr_SetString(PyExc_ValueError, "put_raw: created_at out of datetime's range");
        return NULL;
    }
    if (r->len < 0 || r->len > 0x7FFFFFFF || (r->len && !r->text)) {
        PyErr_SetString(PyExc_ValueError, "put_raw: text too long");
        return NULL;
    }
    if (r->extras && !(PyTuple_CheckExact(r->extras) && PyTuple_GET_SIZE(r->extras) == EC_EXTRAS &&
                       PyTuple_GET_ITEM(r->extras, EC_EXTRAS - 1) == Py_None)) {
        PyErr_SetString(PyExc_TypeError, "put_raw: extras must be None or a tuple of ten "
                                         "ending in None");
        return NULL;
    }
    int ascii = r->ascii;
    if (ascii < 0 && ec_utf8_chars(r->text, r->len, &ascii) < 0) {
        PyErr_SetString(PyExc_ValueError, "put_raw: the text is not UTF-8");
        return NULL;
    }
    EcSlot s = {0};
    uint64_t hi = 0, lo = 0;
    for (int i = 0; i < 8; i++) hi = hi << 8 | r->id[i];
    for (int i = 8; i < 16; i++) lo = lo << 8 | r->id[i];
    s.id_hi = hi, s.id_lo = lo;
    s.created = r->created_us;
    s.relevance = r->relevance;
    s.cat = (uint8_t)r->cat;
    s.len = (uint32_t)r->len;
    if (ascii) s.flags |= EC_ASCII; /* (an empty text too, as put of "") */
    if (r->validated) s.flags |= EC_VALIDATED;
    return ec_put_slot(c, s, r->text, r->extras);
}

static int
ec_cat_code(PyObject *cols, PyObject *cat)
{
    if (!Py_IS_TYPE(cols, &EntryColumns_Type)) return -1;
    PyObject *cats = ((EntryColumnsObject *)cols)->categories;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(cats); k++)
        if (PyTuple_GET_ITEM(cats, k) == cat) return (int)k;
    return -1;
}

static ec_api_t ec_api = {EC_API_VERSION, &EntryColumns_Type, ec_put_raw, ec_utf8_chars,
                          ec_cat_code};

PyDoc_STRVAR(ec_put_raw_doc,
"put_raw(id, created_us, relevance, category, validated, text, extras=None) -> int\n\n"
"Store an entry from the fields as a file's row holds them (the C row reader's path,\n"
"ec_api_t.put_raw, for tests): id its 16 big-endian bytes, created_us created_at's\n"
"microseconds since 0001-01-01T00:00:00 UTC, relevance a float in [0, 1], category the\n"
"category's code, validated a bool, text the memory text's UTF-8 (bytes), extras None\n"
"or the ten sparse fields (tags, access_count, namespace, last_accessed, key, value,\n"
"updated_at, ttl, expires_at, None). Its slot number; TypeError or ValueError for\n"
"anything else (the text not strict UTF-8), the store unchanged. O(len(text)).");

static PyObject *
ec_put_raw_m(EntryColumnsObject *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "put_raw takes 6 or 7 arguments");
        return NULL;
    }
    PyObject *extras = nargs == 7 && args[6] != Py_None ? args[6] : NULL;
    if (!PyBytes_CheckExact(args[0]) || PyBytes_GET_SIZE(args[0]) != 16) {
        PyErr_SetString(PyExc_TypeError, "put_raw: id must be 16 bytes");
        return NULL;
    }
    if (!PyLong_CheckExact(args[1]) || !PyFloat_CheckExact(args[2]) ||
        !PyLong_CheckExact(args[3]) || !PyBool_Check(args[4]) || !PyBytes_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "put_raw: (bytes, int, float, int, bool, bytes)");
        return NULL;
    }
    int overflow = 0;
    long long us = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    long long cat = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (overflow || us == -1 || cat == -1) {
        if (PyErr_Occurred()) return NULL;
        if (overflow || us == -1 || cat == -1) {
            PyErr_SetString(PyExc_ValueError, "put_raw: created_us or category out of range");
            return NULL;
        }
    }
    ec_raw_t r = {
        .id = (const unsigned char *)PyBytes_AS_STRING(args[0]),
        .created_us = us,
        .relevance = PyFloat_AS_DOUBLE(args[2]),
        .cat = cat > 255 ? -1 : (int)cat,
        .validated = args[4] == Py_True,
        .text = PyBytes_AS_STRING(args[5]),
        .len = PyBytes_GET_SIZE(args[5]),
        .ascii = -1,
        .extras = extras,
    };
    return ec_put_raw((PyObject *)c, &r);
}

static PyObject *
ec_text_obj(EntryColumnsObject *c, const EcSlot *s)
{
    const char *p = ec_text_ptr(c, s);
    if (s->flags & EC_ASCII) {
        PyObject *u = PyUnicode_New(s->len, 127);
        if (u && s->len) memcpy(PyUnicode_1BYTE_DATA(u), p, s->len);
        return u;
    }
    return PyUnicode_DecodeUTF8(p, s->len, "strict");
}

static PyObject *
ec_id_obj(const EcSlot *s)
{
    if (!s->id_hi) return PyLong_FromUnsignedLongLong(s->id_lo);
    unsigned char raw[16];
    memcpy(raw, &s->id_lo, 8);
    memcpy(raw + 8, &s->id_hi, 8);
    return long_from_unsigned_bytes(raw, 16, 1);
}

PyDoc_STRVAR(ec_entry_doc,
"entry(slot[, count, last[, expires]]) -> entry\n\n"
"A new entry equal to the one stored at `slot` (its sparse fields the very objects\n"
"stored); with `count` and `last`, its access_count and last_accessed those (and its\n"
"expires_at `expires` unless that is None), unchecked, as _entry.with_access gives\n"
"them. TypeError for a slot that is not an int or another number of arguments,\n"
"IndexError for a slot not live. O(len(text)).");

static PyObject *
ec_entry(EntryColumnsObject *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 && nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "entry takes (slot), (slot, count, last) or "
                                         "(slot, count, last, expires)");
        return NULL;
    }
    PyObject *arg = args[0];
    int64_t at;
    if (ec_slot_arg(c, arg, &at) < 0) return NULL;
    EcSlot *s = ec_at(c, at);
    PyObject *v[EF_N] = {NULL};
    PyObject *x = NULL;
    if (s->flags & EC_EXTRA) {
        x = ec_extras_of(c, arg); /* borrowed */
        if (!x) return NULL;
        Py_INCREF(x);
    }
    v[EF_CATEGORY] = Py_NewRef(PyTuple_GET_ITEM(c->categories, s->cat));
    if (!(v[EF_MEMORY] = ec_text_obj(c, s))) goto fail;
    if (!(v[EF_ID] = ec_id_obj(s))) goto fail;
    if (!(v[EF_RELEVANCE] = PyFloat_FromDouble(s->relevance))) goto fail;
    v[EF_VALIDATED] = Py_NewRef(s->flags & EC_VALIDATED ? Py_True : Py_False);
    if (x) {
        static const int from[EC_EXTRAS - 1] = {EF_TAGS, EF_COUNT, EF_NAMESPACE, EF_LAST, EF_KEY,
                                                EF_VALUE, EF_UPDATED, EF_TTL, EF_EXPIRES};
        for (int i = 0; i < EC_EXTRAS - 1; i++)
            v[from[i]] = Py_NewRef(PyTuple_GET_ITEM(x, i));
        PyObject *cr = PyTuple_GET_ITEM(x, EC_EXTRAS - 1);
        if (cr != Py_None) v[EF_CREATED] = Py_NewRef(cr);
        else if (!(v[EF_CREATED] = ec_time_of(s->created))) goto fail;
    } else {
        if (!(v[EF_CREATED] = ec_time_of(s->created))) goto fail;
        v[EF_TAGS] = PyTuple_New(0);
        v[EF_COUNT] = Py_NewRef(c->zero);
        v[EF_NAMESPACE] = PyTuple_New(0);
        v[EF_LAST] = Py_NewRef(Py_None);
        v[EF_KEY] = Py_NewRef(Py_None);
        v[EF_VALUE] = Py_NewRef(Py_None);
        v[EF_UPDATED] = Py_NewRef(v[EF_CREATED]);
        v[EF_TTL] = Py_NewRef(Py_None);
        v[EF_EXPIRES] = Py_NewRef(Py_None);
        if (!v[EF_TAGS] || !v[EF_NAMESPACE]) goto fail;
    }
    if (nargs > 1) { /* the access bookkeeping replaced, as with_access */
        Py_SETREF(v[EF_COUNT], Py_NewRef(args[1]));
        Py_SETREF(v[EF_LAST], Py_NewRef(args[2]));
        if (nargs == 4 && args[3] != Py_None) Py_SETREF(v[EF_EXPIRES], Py_NewRef(args[3]));
    }
    PyObject *out = c->entry_type->tp_alloc(c->entry_type, 0);
    if (!out) goto fail;
    for (int i = 0; i < EF_N; i++) {
        PyObject **slot = (PyObject **)((char *)out + c->off[i]);
        Py_XSETREF(*slot, v[i]); /* steals */
    }
    Py_XDECREF(x);
    return out;
fail:
    for (int i = 0; i < EF_N; i++) Py_XDECREF(v[i]);
    Py_XDECREF(x);
    return NULL;
}

/* Where each of the sparse fields sits in an extras tuple (-1: not sparse). */
static const int ec_extra_at[EF_N] = {
    [EF_CATEGORY] = -1, [EF_MEMORY] = -1, [EF_ID] = -1, [EF_TAGS] = 0, [EF_CREATED] = 9,
    [EF_RELEVANCE] = -1, [EF_COUNT] = 1, [EF_VALIDATED] = -1, [EF_NAMESPACE] = 2,
    [EF_LAST] = 3, [EF_KEY] = 4, [EF_VALUE] = 5, [EF_UPDATED] = 6, [EF_TTL] = 7,
    [EF_EXPIRES] = 8,
};

PyDoc_STRVAR(ec_get_doc,
"get(slot, name) -> value\n\n"
"The field `name` (one of the fields given at construction, e.g. 'relevance', '_id',\n"
"'created_at', 'tags') of the entry stored at `slot`, as getattr(entry(slot), name)\n"
"gives it, without building the entry. Errors as entry(); ValueError for another name.\n"
"O(1), O(len(text)) for the text.");

static PyObject *
ec_get(EntryColumnsObject *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "get takes 2 arguments (slot, name)");
        return NULL;
    }
    int64_t at;
    if (ec_slot_arg(c, args[0], &at) < 0) return NULL;
    int f = 0;
    for (; f < EF_N; f++) {
        PyObject *name = PyTuple_GET_ITEM(c->names, f);
        if (name == args[1]) break;
        int eq = PyObject_RichCompareBool(name, args[1], Py_EQ);
        if (eq < 0) return NULL;
        if (eq) break;
    }
    if (f == EF_N) {
        PyErr_SetString(PyExc_ValueError, "get: not a field of the entry");
        return NULL;
    }
    EcSlot *s = ec_at(c, at);
    switch (f) {
    case EF_CATEGORY: return Py_NewRef(PyTuple_GET_ITEM(c->categories, s->cat));
    case EF_MEMORY: return ec_text_obj(c, s);
    case EF_ID: return ec_id_obj(s);
    case EF_RELEVANCE: return PyFloat_FromDouble(s->relevance);
    case EF_VALIDATED: return Py_NewRef(s->flags & EC_VALIDATED ? Py_True : Py_False);
    }
    if (s->flags & EC_EXTRA) {
        PyObject *x = ec_extras_of(c, args[0]); /* borrowed */
        if (!x) return NULL;
        PyObject *v = PyTuple_GET_ITEM(x, ec_extra_at[f]);
        if (f == EF_CREATED && v == Py_None) return ec_time_of(s->created);
        return Py_NewRef(v);
    }
    switch (f) {
    case EF_CREATED:
    case EF_UPDATED: return ec_time_of(s->created);
    case EF_TAGS:
    case EF_NAMESPACE: return PyTuple_New(0);
    case EF_COUNT: return Py_NewRef(c->zero);
    default: return Py_NewRef(Py_None);
    }
}

PyDoc_STRVAR(ec_text_doc,
"text(slot) -> str\n\n"
"The text stored at `slot` (a new str). Errors as entry(). O(len(text)).");

static PyObject *
ec_text(EntryColumnsObject *c, PyObject *arg)
{
    int64_t at;
    if (ec_slot_arg(c, arg, &at) < 0) return NULL;
    return ec_text_obj(c, ec_at(c, at));
}

PyDoc_STRVAR(ec_text_equals_doc,
"text_equals(slot, text) -> bool\n\n"
"Whether the text stored at `slot` is `text` (a str), by its UTF-8 bytes. Errors as\n"
"entry(); TypeError for a text that is not a str. A text with a lone surrogate (never\n"
"stored) is never equal. O(len(text)).");

static PyObject *
ec_text_equals(EntryColumnsObject *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "text_equals takes 2 arguments (slot, text)");
        return NULL;
    }
    int64_t at;
    if (ec_slot_arg(c, args[0], &at) < 0) return NULL;
    PyObject *t = args[1];
    if (!PyUnicode_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "text_equals: text must be a str");
        return NULL;
    }
    if (PyUnicode_READY(t) < 0) return NULL;
    return PyBool_FromLong(ec_text_is(c, ec_at(c, at), t));
}

PyDoc_STRVAR(ec_ident_doc,
"ident(slot) -> int\n\n"
"The id's int stored at `slot`. Errors as entry(). O(1).");

static PyObject *
ec_ident(EntryColumnsObject *c, PyObject *arg)
{
    int64_t at;
    if (ec_slot_arg(c, arg, &at) < 0) return NULL;
    return ec_id_obj(ec_at(c, at));
}

PyDoc_STRVAR(ec_row_bytes_doc,
"row_bytes(slot) -> int\n\n"
"The bytes a file's row of the entry at `slot` takes beyond its fixed fields, as the\n"
"durable store counts them for its overflow pages (sqlite._entry_frames): the text's\n"
"UTF-8 bytes, a key's, and 12 a tag character plus 3 a tag plus 2 for tags; -1 where\n"
"that needs the entry (a value, a key that is not ASCII, a tag that is not a str).\n"
"Errors as entry(). O(1), O(tags) with tags.");

static PyObject *
ec_row_bytes(EntryColumnsObject *c, PyObject *arg)
{
    int64_t at;
    if (ec_slot_arg(c, arg, &at) < 0) return NULL;
    EcSlot *s = ec_at(c, at);
    long long size = s->len;
    if (s->flags & EC_EXTRA) {
        PyObject *x = ec_extras_of(c, arg); /* borrowed */
        if (!x) return NULL;
        if (PyTuple_GET_ITEM(x, ec_extra_at[EF_VALUE]) != Py_None) return PyLong_FromLong(-1);
        PyObject *key = PyTuple_GET_ITEM(x, ec_extra_at[EF_KEY]);
        if (key != Py_None) {
            if (!PyUnicode_Check(key) || !PyUnicode_IS_ASCII(key)) return PyLong_FromLong(-1);
            size += PyUnicode_GET_LENGTH(key);
        }
        PyObject *tags = PyTuple_GET_ITEM(x, ec_extra_at[EF_TAGS]);
        if (!PyTuple_Check(tags)) return PyLong_FromLong(-1);
        Py_ssize_t nt = PyTuple_GET_SIZE(tags);
        if (nt) {
            long long chars = 0;
            for (Py_ssize_t i = 0; i < nt; i++) {
                PyObject *tag = PyTuple_GET_ITEM(tags, i);
                if (!PyUnicode_Check(tag)) return PyLong_FromLong(-1);
                chars += PyUnicode_GET_LENGTH(tag);
            }
            size += 12 * chars + 3 * (long long)nt + 2;
        }
    }
    return PyLong_FromLongLong(size);
}

PyDoc_STRVAR(ec_relevance_doc,
"relevance(slot) -> float\n\n"
"The relevance stored at `slot`; for a slot released (not live) the last one stored\n"
"there: a search may score a purged record (invisible to it, dropped after the score)\n"
"found in the index's arrays it took at its start. TypeError for a slot that is not an\n"
"int, IndexError for a number never handed out. O(1).");

static PyObject *
ec_relevance(EntryColumnsObject *c, PyObject *arg)
{
    if (!PyLong_CheckExact(arg)) {
        PyErr_Format(PyExc_TypeError, "slot must be an int, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (overflow || s < 0 || s >= c->next) {
        PyErr_SetString(PyExc_IndexError, "EntryColumns: no slot of that number");
        return NULL;
    }
    return PyFloat_FromDouble(ec_at(c, s)->relevance);
}

PyDoc_STRVAR(ec_release_doc,
"release(slot) -> None\n\n"
"Free `slot` (the owner's, once no reader can read it): its text counted dead, its\n"
"extras dropped, the number reused by a later put(). The text blocks are compacted\n"
"when over a quarter of the bytes held are dead (texts move, slot numbers do not; a\n"
"compaction that cannot allocate is skipped). Errors as entry(), nothing changed.\n"
"O(1) amortized (a compaction is O(slots + live bytes)).");

static PyObject *
ec_release(EntryColumnsObject *c, PyObject *arg)
{
    int64_t at;
    if (ec_slot_arg(c, arg, &at) < 0 || ec_unpinned(c) < 0) return NULL;
    if (c->nfree == c->free_cap) {
        int64_t nc = c->free_cap ? c->free_cap * 2 : 64;
        int64_t *nf = PyMem_Realloc(c->free, (size_t)nc * sizeof(int64_t));
        if (!nf) return PyErr_NoMemory();
        c->free = nf, c->free_cap = nc;
    }
    EcSlot *s = ec_at(c, at);
    if (s->flags & EC_EXTRA) {
        if (PyDict_DelItem(c->extras, arg) < 0) return NULL;
    }
    /* No failure past here. */
    s->flags = 0;
    c->free[c->nfree++] = at;
    c->nlive--;
    if (s->len) {
        EcBlock *b = &c->blocks[s->block];
        b->live -= s->len;
        c->live_bytes -= s->len;
        if (!b->live && s->block != c->nblocks - 1) { /* no live text left: its memory back */
            c->held -= b->used;
            PyMem_Free(b->data);
            b->data = NULL, b->cap = b->used = 0;
        }
    }
    s->len = 0, s->block = EC_NO_BLOCK, s->off = 0;
    if (c->held > 65536 && (c->held - c->live_bytes) * 4 > c->held && ec_compact(c) < 0)
        PyErr_Clear(); /* no memory to compact now: the next release tries again */
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ec_compact_doc,
"compact() -> None\n\n"
"Copy every live text into new blocks and free the old ones (release() does it when a\n"
"quarter is dead). MemoryError leaves the store unchanged. O(slots + live bytes).");

static PyObject *
ec_compact_m(EntryColumnsObject *c, PyObject *unused)
{
    if (ec_unpinned(c) < 0 || ec_compact(c) < 0) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ec_pin_doc,
"pin() -> None\n\n"
"Pin the store for a reader of its slots outside the GIL (a digest's thread): until as\n"
"many unpin() calls, put(), put_raw(), release() and compact() raise RuntimeError and\n"
"change nothing, so no text moves or changes under the reader. Pins nest. O(1).");

static PyObject *
ec_pin(EntryColumnsObject *c, PyObject *unused)
{
    c->pins++;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ec_unpin_doc,
"unpin() -> None\n\n"
"Undo one pin(). RuntimeError (nothing changed) when the store is not pinned. O(1).");

static PyObject *
ec_unpin(EntryColumnsObject *c, PyObject *unused)
{
    if (!c->pins) {
        PyErr_SetString(PyExc_RuntimeError, "EntryColumns.unpin(): not pinned");
        return NULL;
    }
    c->pins--;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ec_fail_put_in_doc,
"_fail_put_in(n) -> None\n\n"
"For tests: the n-th put from now (put or put_raw, 1 the next) raises MemoryError with\n"
"the store unchanged, as when its allocation fails; 0 turns that off. ValueError for a\n"
"negative n. O(1).");

static PyObject *
ec_fail_put_in(EntryColumnsObject *c, PyObject *arg)
{
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "_fail_put_in: n must be >= 0");
        return NULL;
    }
    c->fail_in = (int64_t)n;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(ec_stats_doc,
"stats() -> dict\n\n"
"live (slots), slots (ever handed out), free (on the free list), blocks (allocated),\n"
"held (bytes used in them), live_bytes (of live texts), compactions, nbytes (the\n"
"store's own allocations: chunks, blocks' capacity, the free list; not the extras),\n"
"pins (pin() calls not undone and readers outside the GIL now).\n"
"O(chunks + blocks).");

static PyObject *
ec_stats(EntryColumnsObject *c, PyObject *unused)
{
    uint64_t nbytes = sizeof(EntryColumnsObject) + (uint64_t)c->free_cap * sizeof(int64_t) +
                      (uint64_t)c->blocks_cap * sizeof(EcBlock);
    for (int k = 0; k < c->nchunks; k++)
        nbytes += ((uint64_t)1 << (k + EC_FIRST_SHIFT)) * sizeof(EcSlot);
    uint32_t nblocks = 0;
    for (uint32_t i = 0; i < c->nblocks; i++)
        if (c->blocks[i].data) nblocks++, nbytes += c->blocks[i].cap;
    return Py_BuildValue("{sLsLsLsIsKsKsKsKsL}", "live", (long long)c->nlive, "slots",
                         (long long)c->next, "free", (long long)c->nfree, "blocks", nblocks,
                         "held", (unsigned long long)c->held, "live_bytes",
                         (unsigned long long)c->live_bytes, "compactions",
                         (unsigned long long)c->compactions, "nbytes",
                         (unsigned long long)nbytes, "pins", (long long)c->pins);
}

static PyObject *
ec_bad(const char *what)
{
    PyErr_Format(PyExc_AssertionError, "EntryColumns: %s", what);
    return NULL;
}

PyDoc_STRVAR(ec_check_doc,
"_check() -> None\n\n"
"Verify the store's invariants (for tests): live counts, the free list, every block's\n"
"live bytes, texts inside their blocks, extras exactly for the slots flagged with them.\n"
"AssertionError naming the first broken one. O(slots + blocks).");

static PyObject *
ec_check(EntryColumnsObject *c, PyObject *unused)
{
    uint64_t *live = PyMem_Calloc(c->nblocks + 1, sizeof(uint64_t));
    if (!live) return PyErr_NoMemory();
    int64_t nlive = 0, nextra = 0;
    uint64_t live_bytes = 0, held = 0;
    const char *err = NULL;
    for (int64_t i = 0; i < c->next && !err; i++) {
        EcSlot *s = ec_at(c, i);
        if (!(s->flags & EC_LIVE)) {
            if (s->flags) err = "a free slot has flags";
            continue;
        }
        nlive++;
        if (s->flags & EC_EXTRA) nextra++;
        if (s->cat >= PyTuple_GET_SIZE(c->categories)) err = "a category code out of range";
        if (s->len) {
            if (s->block >= c->nblocks || !c->blocks[s->block].data)
                err = "a text in a freed block";
            else if ((uint64_t)s->off + s->len > c->blocks[s->block].used)
                err = "a text past its block's end";
            else
                live[s->block] += s->len, live_bytes += s->len;
        }
    }
    for (uint32_t b = 0; b < c->nblocks && !err; b++) {
        if (c->blocks[b].live != live[b]) err = "a block's live bytes";
        if (c->blocks[b].used > c->blocks[b].cap) err = "a block used past its capacity";
        if (c->blocks[b].data) held += c->blocks[b].used;
    }
    PyMem_Free(live);
    if (err) return ec_bad(err);
    if (nlive != c->nlive) return ec_bad("the live count");
    if (live_bytes != c->live_bytes) return ec_bad("the live bytes");
    if (held != c->held) return ec_bad("the bytes held");
    if (nlive + c->nfree != c->next) return ec_bad("live and free slots do not add up");
    for (int64_t i = 0; i < c->nfree; i++) {
        int64_t f = c->free[i];
        if (f < 0 || f >= c->next || ec_at(c, f)->flags) return ec_bad("the free list");
    }
    if (PyDict_GET_SIZE(c->extras) != nextra) return ec_bad("the extras' count");
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(c->extras, &pos, &k, &v)) {
        long long s = PyLong_AsLongLong(k);
        if (s == -1 && PyErr_Occurred()) return NULL;
        if (s < 0 || s >= c->next || !(ec_at(c, s)->flags & EC_EXTRA))
            return ec_bad("extras of a slot not flagged");
        if (!PyTuple_CheckExact(v) || PyTuple_GET_SIZE(v) != EC_EXTRAS) return ec_bad("an extras tuple");
    }
    Py_RETURN_NONE;
}

static Py_ssize_t
ec_len(EntryColumnsObject *c)
{
    return (Py_ssize_t)c->nlive;
}

static PyObject *
ec_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyTypeObject *et;
    PyObject *fields, *cats;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!:EntryColumns", &PyType_Type, &et, &PyTuple_Type, &fields,
                          &PyTuple_Type, &cats))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != EF_N) {
        PyErr_SetString(PyExc_ValueError, "EntryColumns: fields must name the entry's 15 slots");
        return NULL;
    }
    if (PyTuple_GET_SIZE(cats) == 0 || PyTuple_GET_SIZE(cats) > 255) {
        PyErr_SetString(PyExc_ValueError, "EntryColumns: 1 to 255 categories");
        return NULL;
    }
    if (!(et->tp_flags & Py_TPFLAGS_HAVE_GC) || et->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError, "EntryColumns: entry_type is not a slots class");
        return NULL;
    }
    Py_ssize_t off[EF_N];
    for (int i = 0; i < EF_N; i++) {
        PyObject *name = PyTuple_GET_ITEM(fields, i);
        if (!PyUnicode_Check(name) || !(off[i] = slot_offset(et, name))) {
            PyErr_SetString(PyExc_TypeError, "EntryColumns: entry_type has no object slot for a field");
            return NULL;
        }
    }
    EntryColumnsObject *c = (EntryColumnsObject *)type->tp_alloc(type, 0);
    if (!c) return NULL;
    c->extras = PyDict_New();
    c->zero = PyLong_FromLong(0);
    if (!c->extras || !c->zero) {
        Py_DECREF(c);
        return NULL;
    }
    c->entry_type = (PyTypeObject *)Py_NewRef((PyObject *)et);
    c->categories = Py_NewRef(cats);
    c->names = Py_NewRef(fields);
    memcpy(c->off, off, sizeof(off));
    return (PyObject *)c;
}

static int
ec_traverse(EntryColumnsObject *c, visitproc visit, void *arg)
{
    Py_VISIT((PyObject *)c->entry_type);
    Py_VISIT(c->categories);
    Py_VISIT(c->names);
    Py_VISIT(c->extras);
    return 0;
}

static int
ec_clear(EntryColumnsObject *c)
{
    Py_CLEAR(c->entry_type);
    Py_CLEAR(c->categories);
    Py_CLEAR(c->names);
    Py_CLEAR(c->extras);
    Py_CLEAR(c->zero);
    return 0;
}

static void
ec_dealloc(EntryColumnsObject *c)
{
    PyObject_GC_UnTrack(c);
    ec_clear(c);
    for (int k = 0; k < c->nchunks; k++) PyMem_Free(c->chunks[k]);
    for (uint32_t i = 0; i < c->nblocks; i++) PyMem_Free(c->blocks[i].data);
    PyMem_Free(c->blocks);
    PyMem_Free(c->free);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef ec_methods[] = {
    {"put", (PyCFunction)ec_put, METH_O, ec_put_doc},
    {"put_raw", (PyCFunction)(void (*)(void))ec_put_raw_m, METH_FASTCALL, ec_put_raw_doc},
    {"entry", (PyCFunction)(void (*)(void))ec_entry, METH_FASTCALL, ec_entry_doc},
    {"text", (PyCFunction)ec_text, METH_O, ec_text_doc},
    {"get", (PyCFunction)(void (*)(void))ec_get, METH_FASTCALL, ec_get_doc},
    {"text_equals", (PyCFunction)(void (*)(void))ec_text_equals, METH_FASTCALL,
     ec_text_equals_doc},
    {"ident", (PyCFunction)ec_ident, METH_O, ec_ident_doc},
    {"relevance", (PyCFunction)ec_relevance, METH_O, ec_relevance_doc},
    {"row_bytes", (PyCFunction)ec_row_bytes, METH_O, ec_row_bytes_doc},
    {"release", (PyCFunction)ec_release, METH_O, ec_release_doc},
    {"compact", (PyCFunction)ec_compact_m, METH_NOARGS, ec_compact_doc},
    {"pin", (PyCFunction)ec_pin, METH_NOARGS, ec_pin_doc},
    {"unpin", (PyCFunction)ec_unpin, METH_NOARGS, ec_unpin_doc},
    {"stats", (PyCFunction)ec_stats, METH_NOARGS, ec_stats_doc},
    {"_check", (PyCFunction)ec_check, METH_NOARGS, ec_check_doc},
    {"_fail_put_in", (PyCFunction)ec_fail_put_in, METH_O, ec_fail_put_in_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods ec_as_sequence = {.sq_length = (lenfunc)ec_len};

PyDoc_STRVAR(ec_doc,
"EntryColumns(entry_type, fields, categories)\n\n"
"Stored entries as 48-byte slots in chunks that never move plus their texts' UTF-8 in\n"
"blocks, an entry built on read (see _entrycols.h). entry_type is the entry class (a\n"
"slots class), fields the names of its 15 slots in _entry._ENTRY_FIELDS' order,\n"
"categories a tuple of 1 to 255 category members (a code is its index). len() is the\n"
"number of live slots. TypeError or ValueError for arguments of another shape.");

static PyTypeObject EntryColumns_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.EntryColumns",
    .tp_basicsize = sizeof(EntryColumnsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = ec_doc,
    .tp_new = ec_new,
    .tp_traverse = (traverseproc)ec_traverse,
    .tp_clear = (inquiry)ec_clear,
    .tp_dealloc = (destructor)ec_dealloc,
    .tp_methods = ec_methods,
    .tp_as_sequence = &ec_as_sequence,
};

static int
ec_module_add(PyObject *m)
{
    if (PyType_Ready(&EntryColumns_Type) < 0) return -1;
    if (PyModule_AddObjectRef(m, "EntryColumns", (PyObject *)&EntryColumns_Type) < 0) return -1;
    PyObject *api = PyCapsule_New(&ec_api, EC_API_CAPSULE, NULL);
    if (!api) return -1;
    int rc = PyModule_AddObjectRef(m, "_entrycols_api", api);
    Py_DECREF(api);
    return rc;
}
