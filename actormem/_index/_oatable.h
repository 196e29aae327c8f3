/* _oatable.h: the open-addressing layout DupTable (_duptable.h), IdTable (_idtable.h) and
 * GroupTable (_grouptable.h) share; each of them includes it once, after defining the
 * parameters below (included by _cwordoverlap.c through them).
 *
 * A table is two arrays of `cap` slots: a uint32 one (a key of its own, or a 32-bit tag
 * of the key's hash) and a value one. A slot's home is its uint32's mixed bits scaled to
 * cap (any cap, not only powers of two: the table grows by x1.4, and its rehash reads
 * only the uint32s); collisions probe linearly; a delete shifts the run after the freed
 * slot back (no tombstones), so every stored uint32 stays reachable from its home
 * without crossing a free slot; the load stays <= 0.7 (a free slot always exists, so a
 * probe ends); below 1/8 the table shrinks to a load of 0.5. What differs stays with
 * each table: how a key is found (the uint32 alone, or a tag match and then the key read
 * back from the value: each its own *_find), and which array tells a free slot.
 *
 * Parameters (each #undef'd at the end of this file):
 *   OA_PREFIX        the generated functions' prefix: OA_PREFIX_place, ...
 *   OA_TABLE         the table's struct: fields cap, used (Py_ssize_t), changes (uint64_t)
 *                    and the two arrays
 *   OA_TAGS, OA_VALS the two arrays' field names (uint32_t *, OA_VAL *)
 *   OA_VAL           the value type
 *   OA_TAG_FREE, OA_VAL_FREE  what a free slot holds in each array: 0 (a new array is
 *                    calloc'ed) or all ones (a new array is memset to 0xFF)
 *   OA_IS_FREE(tags, vals, i)  whether slot i is free (one array read: the key array of
 *                    a table whose keys have a free value, else the value array)
 *
 * Generated (all static): _place, _resize, _reserve_to, _reserve, _free_slot (the
 * backward-shift delete), _gap (the layout's check) and _next_used (iteration). Each is
 * the code the three tables had written out before branch tidy24b (instruction counts:
 * docs/benchmarks.md).
 */

#ifndef ACTORMEM_OATABLE_COMMON
#define ACTORMEM_OATABLE_COMMON

#define OA_MIN_CAP 8

#define OA_CAT2(a, b) a##_##b
#define OA_CAT(a, b) OA_CAT2(a, b)
#define OA_FN(name) OA_CAT(OA_PREFIX, name)

/* murmur3's finaliser: every bit of x moves the top bits the home slot is read from. */
static inline uint32_t
dt_mix(uint32_t k)
{
    k ^= k >> 16;
    k *= 0x85EBCA6Bu;
    k ^= k >> 13;
    k *= 0xC2B2AE35u;
    k ^= k >> 16;
    return k;
}

/* The home slot of uint32 x in a table of cap slots. */
static inline Py_ssize_t
oa_home(uint32_t x, Py_ssize_t cap)
{
    return (Py_ssize_t)(((uint64_t)dt_mix(x) * (uint64_t)cap) >> 32);
}

/* n items of `size` bytes, all bits 0 (calloc) or with `ones` all bits 1; NULL when
 * they cannot be had (no exception set). */
static inline void *
oa_alloc(Py_ssize_t n, size_t size, int ones)
{
    if (!ones) return PyMem_Calloc((size_t)n, size);
    void *p = PyMem_Malloc((size_t)n * size);
    if (p) memset(p, 0xFF, (size_t)n * size);
    return p;
}

#endif /* ACTORMEM_OATABLE_COMMON */

/* Put tag and val into the first free slot from tag's home (the key absent). The caller
 * made room. */
static void
OA_FN(place)(uint32_t *tags, OA_VAL *vals, Py_ssize_t cap, uint32_t tag, OA_VAL val)
{
    Py_ssize_t i = oa_home(tag, cap);
    while (!OA_IS_FREE(tags, vals, i)) {
        if (++i == cap) i = 0;
    }
    tags[i] = tag;
    vals[i] = val;
}

/* Move every slot into arrays of newcap slots (newcap > used / 0.7). -1 with MemoryError
 * and the table unchanged when they cannot be had. */
static int
OA_FN(resize)(OA_TABLE *t, Py_ssize_t newcap)
{
    if (newcap < OA_MIN_CAP) newcap = OA_MIN_CAP;
    if ((size_t)newcap > (size_t)PY_SSIZE_T_MAX / (sizeof(uint32_t) + sizeof(OA_VAL))) {
        PyErr_NoMemory();
        return -1;
    }
    uint32_t *tags = oa_alloc(newcap, sizeof(uint32_t), OA_TAG_FREE != 0);
    OA_VAL *vals = oa_alloc(newcap, sizeof(OA_VAL), OA_VAL_FREE != 0);
    if (!tags || !vals) {
        PyMem_Free(tags);
        PyMem_Free(vals);
        PyErr_NoMemory();
        return -1;
    }
    uint32_t *old_tags = t->OA_TAGS;
    OA_VAL *old_vals = t->OA_VALS;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (!OA_IS_FREE(old_tags, old_vals, i))
            OA_FN(place)(tags, vals, newcap, old_tags[i], old_vals[i]);
    }
    PyMem_Free(old_tags);
    PyMem_Free(old_vals);
    t->OA_TAGS = tags;
    t->OA_VALS = vals;
    t->cap = newcap;
    t->changes++;
    return 0;
}

/* Room for `extra` more keys without a resize (the load stays <= 0.7); -1 MemoryError.
 * A resize leaves a load of 0.5, or with `tight` (a bulk load's one reserve) 0.7. */
static int
OA_FN(reserve_to)(OA_TABLE *t, Py_ssize_t extra, int tight)
{
    if (extra < 0 || t->used > PY_SSIZE_T_MAX / 32 - extra) { /* need * 10 cannot overflow */
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = t->used + extra;
    if (t->cap && need * 10 <= t->cap * 7) return 0;
    return OA_FN(resize)(t, tight ? need * 10 / 7 + 1 : need * 2);
}

static inline int
OA_FN(reserve)(OA_TABLE *t, Py_ssize_t extra)
{
    return OA_FN(reserve_to)(t, extra, 0);
}

/* Free slot i (a used one; its value is the caller's: read it first): the run after it
 * shifts back over the hole; then the table shrinks if its load fell below 1/8 (kept as
 * it is when the smaller arrays cannot be had). */
static void
OA_FN(free_slot)(OA_TABLE *t, Py_ssize_t i)
{
    uint32_t *tags = t->OA_TAGS;
    OA_VAL *vals = t->OA_VALS;
    Py_ssize_t cap = t->cap;
    Py_ssize_t j = i;
    for (;;) {
        if (++j == cap) j = 0;
        if (OA_IS_FREE(tags, vals, j)) break;
        Py_ssize_t h = oa_home(tags[j], cap);
        /* slot j stays when its home lies cyclically in (i, j]: moving it to i would put
         * it before its home. */
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        tags[i] = tags[j];
        vals[i] = vals[j];
        i = j;
    }
    tags[i] = OA_TAG_FREE;
    vals[i] = OA_VAL_FREE;
    t->used--;
    t->changes++;
    if (t->cap > OA_MIN_CAP && t->used * 8 < t->cap) {
        if (OA_FN(resize)(t, t->used * 2) < 0) PyErr_Clear(); /* keep the larger arrays */
    }
}

/* Whether a free slot lies between tag's home and slot i (the layout's rule broken:
 * the tables' _check). O(distance). */
static int
OA_FN(gap)(const OA_TABLE *t, uint32_t tag, Py_ssize_t i)
{
    for (Py_ssize_t j = oa_home(tag, t->cap); j != i; j = j + 1 == t->cap ? 0 : j + 1) {
        if (OA_IS_FREE(t->OA_TAGS, t->OA_VALS, j)) return 1;
    }
    return 0;
}

/* The first used slot at or after pos, or cap (iteration in slot order). */
static inline Py_ssize_t
OA_FN(next_used)(const OA_TABLE *t, Py_ssize_t pos)
{
    while (pos < t->cap && OA_IS_FREE(t->OA_TAGS, t->OA_VALS, pos)) pos++;
    return pos;
}

#undef OA_PREFIX
#undef OA_TABLE
#undef OA_TAGS
#undef OA_VALS
#undef OA_VAL
#undef OA_TAG_FREE
#undef OA_VAL_FREE
#undef OA_IS_FREE
