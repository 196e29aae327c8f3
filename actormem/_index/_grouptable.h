/* GroupTable: the word-overlap index's text -> group number map (included by
 * _cwordoverlap.c; wordoverlap/knobs._GROUP_TABLE).
 *
 * The index numbers each distinct text (a group) and keeps, per number, the group's item
 * in a list, `glist` (the one record of that text, a _Group of several, or None once the
 * text left). A dict from text to number spends a ~38 B slot (at 1M) and a 28-32 B int
 * object on each text; the key str is the entry's own. This table keeps neither the key
 * nor an int: a slot is a 32-bit tag of the text's hash beside the group number as an
 * int32 (8 B), and the text is read back from the group's item (`rec.entry.memory` or
 * `group.text`, slot reads at offsets fixed when the table is made) only when a tag
 * matches: 11-16 B a text at a load between 0.5 and 0.7.
 *
 * Layout: two arrays of `cap` slots, `tags` and `gids` (-1 where free). The probes,
 * growth and backward-shift delete are _oatable.h's (shared with DupTable and IdTable),
 * "free" read from the number: a text's home slot is its tag's mixed bits scaled to cap
 * (the rehash needs no text), linear probing, no tombstones, a load between 0.5 and 0.7
 * (below 1/8 the table shrinks).
 *
 * Keys are str (a str subclass is its str value: the hash is str's and texts are
 * compared by their code points, so no user code runs inside a probe; anything else is
 * absent for reads and a TypeError for writes). A write table[text] = g needs glist[g] to
 * carry that very text (else ValueError, nothing changed), and g < 2**31 - 1. Iteration
 * (keys read back from glist) is in slot order and raises RuntimeError once a text came
 * or went since it began. The table holds glist (a strong reference) and takes part in
 * the cycle collector. C callers (add_groups_new) use gt_find_str, gt_reserve and
 * gt_append_item.
 */

#define GT_FREE (-1)

typedef struct {
    PyObject_HEAD
    Py_ssize_t cap;        /* slots (0: no arrays yet) */
    Py_ssize_t used;       /* texts stored */
    uint32_t *tags;        /* cap tags (meaningless where gids[i] is GT_FREE) */
    int32_t *gids;         /* cap group numbers, GT_FREE where free */
    uint64_t changes;      /* bumped when a text comes or goes or slots move */
    PyObject *glist;       /* the group list (a list, strong); NULL once cleared */
    PyTypeObject *rec_type;   /* the records' class (strong) */
    PyTypeObject *entry_type; /* the entries' class (strong); EntryColumns in the store's
                               * layout */
    PyTypeObject *group_type; /* the _Group class (strong) */
    Py_ssize_t entry_off;  /* the record's `entry` slot; its `cols` in the store's layout */
    Py_ssize_t memory_off; /* the entry's `memory` slot; the record's `slot` in the store's */
    int cols;              /* the store's layout (issue #20 item 6, step A): a record's
                            * text is read from its slot of its EntryColumns */
    int slot_i64;          /* the record's `slot` is an int64 field (the compiled Record) */
    Py_ssize_t text_off;   /* the group's `text` slot */
    uint32_t tag_mask;     /* all ones; fewer bits only in tests (shared homes) */
} GroupTableObject;

static PyTypeObject GroupTable_Type;
static PyTypeObject GroupTableIter_Type;

#define GT_SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* The store's layout: record rec's live slot (its store in *store), or NULL. */
static inline const EcSlot *
gt_ec_slot(const GroupTableObject *t, PyObject *rec, EntryColumnsObject **store)
{
    PyObject *c = GT_SLOT(rec, t->entry_off);
    if (!c || !Py_IS_TYPE(c, t->entry_type)) return NULL;
    EntryColumnsObject *ec = (EntryColumnsObject *)c;
    const EcSlot *e = ec_rec_slot(ec, rec, t->memory_off, t->slot_i64);
    if (e) *store = ec;
    return e;
}

/* The text a group item carries (a new reference), or NULL (None, another type, a slot
 * not set, a text that is no str: found by nothing, _check reports it; or an error, with
 * an exception set). */
static inline PyObject *
gt_text_of(const GroupTableObject *t, PyObject *item)
{
    PyObject *s;
    if (t->cols && Py_IS_TYPE(item, t->rec_type)) {
        EntryColumnsObject *ec;
        const EcSlot *e = gt_ec_slot(t, item, &ec);
        return e ? ec_text_obj(ec, e) : NULL;
    }
    if (Py_IS_TYPE(item, t->rec_type)) {
        PyObject *e = GT_SLOT(item, t->entry_off);
        if (!e || !Py_IS_TYPE(e, t->entry_type)) return NULL;
        s = GT_SLOT(e, t->memory_off);
    } else if (Py_IS_TYPE(item, t->group_type)) {
        s = GT_SLOT(item, t->text_off);
    } else {
        return NULL;
    }
    return s && PyUnicode_Check(s) && PyUnicode_IS_READY(s) ? Py_NewRef(s) : NULL;
}

/* The text of group number g (a new reference), or NULL (as gt_text_of). */
static inline PyObject *
gt_text_at(const GroupTableObject *t, Py_ssize_t g)
{
    PyObject *gl = t->glist;
    if (!gl || g < 0 || g >= PyList_GET_SIZE(gl)) return NULL;
    return gt_text_of(t, PyList_GET_ITEM(gl, g));
}

/* Whether two ready str hold the same code points (no code runs: str's own rule). */
static inline int
gt_str_eq(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    if (n != PyUnicode_GET_LENGTH(b) || kind != (int)PyUnicode_KIND(b)) return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

#define OA_PREFIX gt
#define OA_TABLE GroupTableObject
#define OA_TAGS tags
#define OA_VALS gids
#define OA_VAL int32_t
#define OA_TAG_FREE 0
#define OA_VAL_FREE GT_FREE
#define OA_IS_FREE(tags, vals, i) ((vals)[i] == GT_FREE)
#include "_oatable.h"

/* The tag of str key (ready after this), or -1 with an exception. str's own hash (the
 * cached one): a subclass's __hash__ is not called. */
static inline int
gt_tag_of(const GroupTableObject *t, PyObject *key, uint32_t *tag)
{
    Py_hash_t h = PyUnicode_Type.tp_hash(key);
    if (h == -1 && PyErr_Occurred()) return -1;
    uint64_t x = (uint64_t)h;
    *tag = (uint32_t)(x ^ (x >> 32)) & t->tag_mask;
    return 0;
}

/* The slot holding str key (ready; tag its tag), or -1 when absent. Runs no code. */
static Py_ssize_t
gt_find(const GroupTableObject *t, PyObject *key, uint32_t tag)
{
    Py_ssize_t cap = t->cap;
    if (cap == 0) return -1;
    const uint32_t *tags = t->tags;
    const int32_t *gids = t->gids;
    Py_ssize_t i = oa_home(tag, cap);
    Py_ssize_t found = -1;
    for (;;) {
        int32_t g = gids[i];
        if (g == GT_FREE) break;
        if (tags[i] == tag) {
            PyObject *gl = t->glist, *item;
            if (gl && g < PyList_GET_SIZE(gl) && t->cols &&
                Py_IS_TYPE(item = PyList_GET_ITEM(gl, g), t->rec_type)) {
                EntryColumnsObject *ec;
                const EcSlot *e = gt_ec_slot(t, item, &ec);
                if (e && ec_text_is(ec, e, key)) {
                    found = i;
                    break;
                }
            } else {
                PyObject *s = gt_text_at(t, g);
                int eq = s && gt_str_eq(s, key);
                Py_XDECREF(s);
                if (eq) {
                    found = i;
                    break;
                }
            }
        }
        if (++i == cap) i = 0;
    }
    return found;
}

/* gt_find for the text of store slot e of ec instead of a str (equal strict UTF-8:
 * equal texts): the slot holding it, or -1 when absent. Runs no code but a str made
 * of a group's text (gt_text_at; an error there is cleared: not equal). */
static Py_ssize_t
gt_find_slot(const GroupTableObject *t, const EntryColumnsObject *ec, const EcSlot *e,
             uint32_t tag)
{
    Py_ssize_t cap = t->cap;
    if (cap == 0) return -1;
    const char *p = ec_text_ptr(ec, e);
    for (Py_ssize_t i = oa_home(tag, cap);;) {
        int32_t g = t->gids[i];
        if (g == GT_FREE) return -1;
        if (t->tags[i] == tag) {
            PyObject *gl = t->glist, *item;
            if (gl && g < PyList_GET_SIZE(gl) && t->cols &&
                Py_IS_TYPE(item = PyList_GET_ITEM(gl, g), t->rec_type)) {
                EntryColumnsObject *oec;
                const EcSlot *o = gt_ec_slot(t, item, &oec);
                if (o && o->len == e->len && ((o->flags ^ e->flags) & EC_ASCII) == 0 &&
                    memcmp(ec_text_ptr(oec, o), p, e->len) == 0)
                    return i;
            } else {
                PyObject *s = gt_text_at(t, g);
                int eq = s && ec_text_is(ec, e, s);
                Py_XDECREF(s);
                PyErr_Clear();
                if (eq) return i;
            }
        }
        if (++i == cap) i = 0;
    }
}

/* The slot of key (any object: a non-str is absent), -1 absent, -2 an error; *tag set. */
static Py_ssize_t
gt_find_str(const GroupTableObject *t, PyObject *key, uint32_t *tag)
{
    if (!PyUnicode_Check(key)) return -1;
    if (gt_tag_of(t, key, tag) < 0) return -2;
    return gt_find(t, key, *tag);
}

/* Free slot i (holding a text): the run after it shifts back over the hole. */
static inline void
gt_take(GroupTableObject *t, Py_ssize_t i)
{
    gt_free_slot(t, i);
}

/* A group number from an int: 0 .. INT32_MAX - 1, else -1 with TypeError / ValueError. */
static int32_t
gt_gid_of(PyObject *v)
{
    if (!PyLong_CheckExact(v)) {
        PyErr_Format(PyExc_TypeError, "GroupTable values are ints, not %.100s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    int overflow;
    long long g = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (g == -1 && PyErr_Occurred()) return -1;
    if (overflow || g < 0 || g >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "GroupTable: a group number in [0, 2**31 - 1)");
        return -1;
    }
    return (int32_t)g;
}

/* table[key] = g: key a str, glist[g] carrying that text. 0, or -1 (TypeError,
 * ValueError, MemoryError) with nothing changed. */
static int
gt_put(GroupTableObject *t, PyObject *key, PyObject *val)
{
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "GroupTable keys are str, not %.100s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    int32_t g = gt_gid_of(val);
    if (g < 0) return -1;
    uint32_t tag;
    if (gt_tag_of(t, key, &tag) < 0) return -1;
    PyObject *s = gt_text_at(t, g);
    int eq = s && gt_str_eq(s, key);
    Py_XDECREF(s);
    if (!eq) {
        if (PyErr_Occurred()) return -1;
        PyErr_SetString(PyExc_ValueError,
                        "GroupTable: the group number's item does not carry the text");
        return -1;
    }
    Py_ssize_t i = gt_find(t, key, tag);
    if (i >= 0) {
        t->gids[i] = g;
        return 0;
    }
    if (gt_reserve(t, 1) < 0) return -1;
    gt_place(t->tags, t->gids, t->cap, tag, g);
    t->used++;
    t->changes++;
    return 0;
}

/* glist.append(item) and its text mapped to its number (the old len(glist)), the text
 * (borrowed, ready) and its tag given: the text must be absent. 0 or -1 (MemoryError,
 * OverflowError), nothing changed then. */
static int
gt_append_item(GroupTableObject *t, PyObject *item, uint32_t tag)
{
    PyObject *gl = t->glist;
    if (!gl) {
        PyErr_SetString(PyExc_RuntimeError, "GroupTable: cleared");
        return -1;
    }
    Py_ssize_t g = PyList_GET_SIZE(gl);
    if (g >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "GroupTable: 2**31 - 1 group numbers");
        return -1;
    }
    if (gt_reserve(t, 1) < 0 || PyList_Append(gl, item) < 0) return -1;
    gt_place(t->tags, t->gids, t->cap, tag, (int32_t)g);
    t->used++;
    t->changes++;
    return 0;
}

/* The member descriptor's slot offset (an object slot of a plain class), or -1 with
 * TypeError; *type is its class (borrowed). */
static Py_ssize_t
gt_descr_offset(PyObject *descr, PyTypeObject **type, int *i64)
{
    *i64 = 0;
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "GroupTable() takes three slot descriptors");
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
        PyErr_SetString(PyExc_TypeError, "GroupTable(): an object slot of a plain class expected");
        return -1;
    }
    *type = tp;
    return m->offset;
}

static PyObject *
GroupTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs < 4 || nargs > 5 || (kwds && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "GroupTable(glist, entry_slot, memory_slot, text_slot[, tag_mask]) "
                        "takes 4 or 5 positional arguments");
        return NULL;
    }
    PyObject *gl = PyTuple_GET_ITEM(args, 0);
    if (!PyList_CheckExact(gl)) {
        PyErr_SetString(PyExc_TypeError, "GroupTable(): glist must be a list");
        return NULL;
    }
    uint32_t mask = 0xFFFFFFFFu;
    if (nargs == 5) {
        PyObject *m = PyTuple_GET_ITEM(args, 4);
        unsigned long long v = PyLong_CheckExact(m) ? PyLong_AsUnsignedLongLong(m) : 0;
        if (!PyLong_CheckExact(m) || (v == (unsigned long long)-1 && PyErr_Occurred()) ||
            v > 0xFFFFFFFFull) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "GroupTable(): tag_mask in [0, 2**32)");
            return NULL;
        }
        mask = (uint32_t)v;
    }
    PyTypeObject *rt, *et, *grt;
    int ei64, mi64, ti64;
    Py_ssize_t eoff = gt_descr_offset(PyTuple_GET_ITEM(args, 1), &rt, &ei64);
    if (eoff < 0) return NULL;
    Py_ssize_t moff = gt_descr_offset(PyTuple_GET_ITEM(args, 2), &et, &mi64);
    if (moff < 0) return NULL;
    Py_ssize_t toff = gt_descr_offset(PyTuple_GET_ITEM(args, 3), &grt, &ti64);
    if (toff < 0) return NULL;
    int cols = rt == et; /* (Record.cols, Record.slot): the store's layout */
    if (ei64 || ti64 || (mi64 && !cols)) {
        PyErr_SetString(PyExc_TypeError, "GroupTable(): an object slot of a plain class expected");
        return NULL;
    }
    if (cols && eoff == moff) {
        PyErr_SetString(PyExc_TypeError, "GroupTable(): two different slots of the records");
        return NULL;
    }
    if (cols) et = &EntryColumns_Type;
    if (rt == et || rt == grt || et == grt) {
        PyErr_SetString(PyExc_TypeError, "GroupTable(): three slots of three classes expected");
        return NULL;
    }
    GroupTableObject *t = (GroupTableObject *)type->tp_alloc(type, 0);
    if (!t) return NULL;
    t->cap = t->used = 0;
    t->tags = NULL;
    t->gids = NULL;
    t->changes = 0;
    t->glist = Py_NewRef(gl);
    t->rec_type = (PyTypeObject *)Py_NewRef((PyObject *)rt);
    t->entry_type = (PyTypeObject *)Py_NewRef((PyObject *)et);
    t->group_type = (PyTypeObject *)Py_NewRef((PyObject *)grt);
    t->entry_off = eoff;
    t->memory_off = moff;
    t->text_off = toff;
    t->cols = cols;
    t->slot_i64 = mi64;
    t->tag_mask = mask;
    return (PyObject *)t;
}

/* Empty the table and drop glist (a release may run code that reads the table: it is
 * empty and without glist first). The classes stay. */
static int
GroupTable_clear_impl(GroupTableObject *t)
{
    PyMem_Free(t->tags);
    PyMem_Free(t->gids);
    t->tags = NULL;
    t->gids = NULL;
    t->cap = t->used = 0;
    t->changes++;
    Py_CLEAR(t->glist);
    return 0;
}

static int
GroupTable_tp_clear(PyObject *self)
{
    return GroupTable_clear_impl((GroupTableObject *)self);
}

static int
GroupTable_traverse(PyObject *self, visitproc visit, void *arg)
{
    GroupTableObject *t = (GroupTableObject *)self;
    Py_VISIT(t->glist);
    Py_VISIT((PyObject *)t->rec_type);
    Py_VISIT((PyObject *)t->entry_type);
    Py_VISIT((PyObject *)t->group_type);
    return 0;
}

static void
GroupTable_dealloc(PyObject *self)
{
    GroupTableObject *t = (GroupTableObject *)self;
    PyObject_GC_UnTrack(self);
    GroupTable_clear_impl(t);
    Py_CLEAR(t->rec_type);
    Py_CLEAR(t->entry_type);
    Py_CLEAR(t->group_type);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t
GroupTable_len(PyObject *self)
{
    return ((GroupTableObject *)self)->used;
}

static PyObject *
GroupTable_subscript(PyObject *self, PyObject *key)
{
    GroupTableObject *t = (GroupTableObject *)self;
    uint32_t tag;
    Py_ssize_t i = gt_find_str(t, key, &tag);
    if (i == -2) return NULL;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return PyLong_FromLong(t->gids[i]);
}

static int
GroupTable_ass_subscript(PyObject *self, PyObject *key, PyObject *val)
{
    GroupTableObject *t = (GroupTableObject *)self;
    if (val) return gt_put(t, key, val);
    uint32_t tag;
    Py_ssize_t i = gt_find_str(t, key, &tag);
    if (i == -2) return -1;
    if (i < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    gt_take(t, i);
    return 0;
}

static int
GroupTable_contains(PyObject *self, PyObject *key)
{
    uint32_t tag;
    Py_ssize_t i = gt_find_str((GroupTableObject *)self, key, &tag);
    return i == -2 ? -1 : i >= 0;
}

PyDoc_STRVAR(GroupTable_get_doc,
"get(text, default=None, /) -> int | default\n\n"
"table[text] if text is mapped, else default (also for a key that is no str).\n"
"O(1) expected (one text comparison per slot whose tag matches).");

static PyObject *
GroupTable_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get() takes 1 or 2 arguments");
        return NULL;
    }
    GroupTableObject *t = (GroupTableObject *)self;
    uint32_t tag;
    Py_ssize_t i = gt_find_str(t, args[0], &tag);
    if (i == -2) return NULL;
    if (i >= 0) return PyLong_FromLong(t->gids[i]);
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

PyDoc_STRVAR(GroupTable_append_doc,
"append(item, /) -> int\n\n"
"glist.append(item) and item's text (rec.entry.memory, or group.text) mapped to its\n"
"group number, the old len(glist), which is returned: the index's step for a new text\n"
"in one call. TypeError for an item that carries no str text, ValueError when the text\n"
"is mapped already, OverflowError at 2**31 - 1 numbers; nothing changed then.\n"
"O(1) amortized.");

static PyObject *
GroupTable_append(PyObject *self, PyObject *item)
{
    GroupTableObject *t = (GroupTableObject *)self;
    PyObject *text = gt_text_of(t, item);
    if (!text) {
        if (PyErr_Occurred()) return NULL;
        PyErr_SetString(PyExc_TypeError,
                        "GroupTable.append(): a record or group of the table's classes "
                        "with a str text expected");
        return NULL;
    }
    uint32_t tag = 0;
    Py_ssize_t i = gt_find_str(t, text, &tag);
    Py_DECREF(text);
    if (i == -2) return NULL;
    if (i >= 0) {
        PyErr_SetString(PyExc_ValueError, "GroupTable.append(): the text is mapped already");
        return NULL;
    }
    if (!t->glist) {
        PyErr_SetString(PyExc_RuntimeError, "GroupTable: cleared");
        return NULL;
    }
    Py_ssize_t g = PyList_GET_SIZE(t->glist);
    if (gt_append_item(t, item, tag) < 0) return NULL;
    return PyLong_FromSsize_t(g);
}

/* Texts index_from looks ahead (0: none), while gt_ahead_on (group_ahead(); open31). */
#ifndef GT_AHEAD
#define GT_AHEAD 8
#endif
static int gt_ahead_on = 1;
#if defined(__GNUC__) || defined(__clang__)
#define GT_PREFETCH(p) __builtin_prefetch(p)
#else
#define GT_PREFETCH(p) ((void)(p))
#endif

PyDoc_STRVAR(GroupTable_index_from_doc,
"index_from(start, texts=None, /) -> None\n\n"
"Map the text of every item glist[start:] to its number (a restore's or renumbering's\n"
"bulk fill, one allocation). Every one must carry a str text not mapped yet (TypeError /\n"
"ValueError otherwise, and the texts mapped by this call are unmapped again).\n"
"texts: None, or a list of len(glist) - start strs, texts[i] the text of glist[start + i]\n"
"(a restore's texts, read from the rows): each is hashed and mapped in place of a str\n"
"made from the store, once found equal to its item's text (an item it is not, or not\n"
"an exact str: the item's own text, as without texts). ValueError for start < 0.\n"
"hashes: None, or the bytes of an int64 array of len(glist) - start values (the\n"
"reader's FoldedRows.hashes of the rows these items are): a value other than -1 is\n"
"taken as str's hash of the item's text when the item is a record whose stored text is\n"
"ASCII, and that text is mapped without a str made of it (compared by its UTF-8); the\n"
"others as without hashes (branch open42). TypeError unless bytes or None, ValueError\n"
"for another length. O(len(glist) - start + len(table)).");

/* The text to map for item g: given (a new reference) when it is an exact str equal to
 * the item's text (a record's in the store's layout by its UTF-8, a group's by value),
 * else gt_text_at's. */
static inline PyObject *
gt_text_given(const GroupTableObject *t, Py_ssize_t g, PyObject *given)
{
    if (given && PyUnicode_CheckExact(given) && t->glist && g < PyList_GET_SIZE(t->glist)) {
        PyObject *item = PyList_GET_ITEM(t->glist, g);
        if (t->cols && Py_IS_TYPE(item, t->rec_type)) {
            EntryColumnsObject *ec;
            const EcSlot *e = gt_ec_slot(t, item, &ec);
            if (e && ec_text_is(ec, e, given)) return Py_NewRef(given);
        } else {
            PyObject *s = gt_text_of(t, item);
            int eq = s && gt_str_eq(s, given);
            if (eq) return s; /* the item's own (kept by it) */
            Py_XDECREF(s);
        }
    }
    if (PyErr_Occurred()) return NULL;
    return gt_text_at(t, g);
}

static PyObject *
GroupTable_index_from(PyObject *self, PyObject *args)
{
    GroupTableObject *t = (GroupTableObject *)self;
    PyObject *arg, *texts = Py_None, *hashobj = Py_None;
    if (!PyArg_ParseTuple(args, "O|OO:index_from", &arg, &texts, &hashobj)) return NULL;
    if (hashobj != Py_None && !PyBytes_CheckExact(hashobj)) {
        PyErr_SetString(PyExc_TypeError, "index_from(): hashes must be bytes or None");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(arg);
    if (start == -1 && PyErr_Occurred()) return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "index_from(): start < 0");
        return NULL;
    }
    if (!t->glist) {
        PyErr_SetString(PyExc_RuntimeError, "GroupTable: cleared");
        return NULL;
    }
    Py_ssize_t stop = PyList_GET_SIZE(t->glist);
    if (stop >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "GroupTable: 2**31 - 1 group numbers");
        return NULL;
    }
    if (texts != Py_None && !PyList_CheckExact(texts)) {
        PyErr_SetString(PyExc_TypeError, "index_from(): texts must be a list or None");
        return NULL;
    }
    if (hashobj != Py_None && PyBytes_GET_SIZE(hashobj) != 8 * (start < stop ? stop - start : 0)) {
        PyErr_SetString(PyExc_ValueError, "index_from(): hashes must hold 8 bytes an item");
        return NULL;
    }
    /* the bytes are immutable and held by the caller's arguments */
    const int64_t *hs = hashobj != Py_None ? (const int64_t *)PyBytes_AS_STRING(hashobj) : NULL;
    if (start < stop && gt_reserve_to(t, stop - start, 1) < 0) return NULL;
    /* the texts given, when one a glist item from start (re-read: only the table's
     * code runs below, but a list's size is checked before each read anyway) */
    PyObject *given_list = texts != Py_None ? texts : NULL;
    /* The texts GT_AHEAD numbers on (owned: gt_text_given's, checked against the item
     * as at its own turn) and their tags, their home slots asked for from memory (a
     * table of 1M texts is ~12 MiB: each probe missed the caches); the table's arrays
     * do not move in this loop (reserved above). */
    uint32_t ahead[GT_AHEAD ? GT_AHEAD : 1];
    PyObject *ahead_s[GT_AHEAD ? GT_AHEAD : 1] = {NULL};
    int look = GT_AHEAD && gt_ahead_on && !hs; /* with hashes: homes asked by them */
    Py_ssize_t g = start;
    for (; g < stop; g++) {
        if (hs) { /* the item's text mapped by the reader's hash, when it has one */
            if (GT_AHEAD && g + GT_AHEAD < stop && hs[g + GT_AHEAD - start] != -1) {
                uint64_t y = (uint64_t)hs[g + GT_AHEAD - start];
                Py_ssize_t home = oa_home((uint32_t)(y ^ (y >> 32)) & t->tag_mask, t->cap);
                GT_PREFETCH(&t->tags[home]);
                GT_PREFETCH(&t->gids[home]);
            }
            PyObject *item = PyList_GET_SIZE(t->glist) == stop ? PyList_GET_ITEM(t->glist, g)
                                                               : NULL;
            EntryColumnsObject *ec;
            const EcSlot *e = item && hs[g - start] != -1 && t->cols &&
                                      Py_IS_TYPE(item, t->rec_type)
                                  ? gt_ec_slot(t, item, &ec)
                                  : NULL;
            if (e && (e->flags & EC_ASCII)) {
                uint64_t x = (uint64_t)hs[g - start];
                uint32_t tag = (uint32_t)(x ^ (x >> 32)) & t->tag_mask;
                if (gt_find_slot(t, ec, e, tag) >= 0) {
                    PyErr_Format(PyExc_ValueError,
                                 "index_from(): the text of glist[%zd] is mapped", g);
                    break;
                }
                gt_place(t->tags, t->gids, t->cap, tag, (int32_t)g);
                t->used++;
                t->changes++;
                continue;
            }
        }
        PyObject *given = given_list && PyList_GET_SIZE(given_list) == stop - start
                              ? PyList_GET_ITEM(given_list, g - start)
                              : NULL;
        int k = (int)(g % (GT_AHEAD ? GT_AHEAD : 1)); /* g's slot in the ring, then g + GT_AHEAD's */
        PyObject *s = ahead_s[k]; /* made, checked and hashed GT_AHEAD turns ago */
        int have_tag = s != NULL;
        ahead_s[k] = NULL;
        if (!s) s = gt_text_given(t, g, given);
        if (!s) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "index_from(): glist[%zd] carries no str text", g);
            break;
        }
        uint32_t tag;
        if (have_tag) {
            tag = ahead[k];
        } else if (gt_tag_of(t, s, &tag) < 0) {
            Py_DECREF(s);
            break;
        }
        if (look && g + GT_AHEAD < stop) {
            Py_ssize_t n = g + GT_AHEAD;
            PyObject *ngiven = given_list && PyList_GET_SIZE(given_list) == stop - start
                                   ? PyList_GET_ITEM(given_list, n - start)
                                   : NULL;
            PyObject *next = gt_text_given(t, n, ngiven);
            if (next && gt_tag_of(t, next, &ahead[k]) == 0) {
                ahead_s[k] = next;
                Py_ssize_t home = oa_home(ahead[k], t->cap);
                GT_PREFETCH(&t->tags[home]);
                GT_PREFETCH(&t->gids[home]);
            } else {
                Py_XDECREF(next);
                PyErr_Clear(); /* the loop takes it again at its turn */
            }
        }
        Py_ssize_t at = gt_find(t, s, tag);
        Py_DECREF(s);
        if (at >= 0) {
            PyErr_Format(PyExc_ValueError, "index_from(): the text of glist[%zd] is mapped", g);
            break;
        }
        gt_place(t->tags, t->gids, t->cap, tag, (int32_t)g);
        t->used++;
        t->changes++;
    }
    for (int r = 0; r < (GT_AHEAD ? GT_AHEAD : 1); r++) Py_XDECREF(ahead_s[r]);
    if (g == stop) Py_RETURN_NONE;
    /* Undo: the texts of start .. g - 1 were mapped here (each found under its own). */
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    for (Py_ssize_t u = start; u < g; u++) {
        PyObject *s = gt_text_at(t, u);
        uint32_t tag;
        if (!s || gt_tag_of(t, s, &tag) < 0) { /* hashes of kept texts are cached */
            Py_XDECREF(s);
            PyErr_Clear();
            continue;
        }
        Py_ssize_t i = gt_find(t, s, tag);
        Py_DECREF(s);
        if (i >= 0 && t->gids[i] == (int32_t)u) gt_take(t, i);
    }
    PyErr_Restore(et, ev, etb);
    return NULL;
}

PyDoc_STRVAR(GroupTable_reserve_doc,
"reserve(n, /) -> None\n\n"
"Room for n more texts without growing (at a load of 0.7 once they are in).\n"
"ValueError for n < 0, OverflowError past 2**31 - 1 texts in all. O(len(table) + n).");

static PyObject *
GroupTable_reserve(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "reserve(): n < 0");
        return NULL;
    }
    /* Texts have distinct numbers below 2**31 - 1: more can never be stored (and a
     * request past it would only try a huge allocation). */
    if (n > (Py_ssize_t)INT32_MAX - 1 - ((GroupTableObject *)self)->used) {
        PyErr_SetString(PyExc_OverflowError,
                        "reserve(): more than 2**31 - 1 texts (the group numbers' limit)");
        return NULL;
    }
    if (gt_reserve_to((GroupTableObject *)self, n, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(GroupTable_check_doc,
"_check() -> None\n\n"
"Assert the layout's invariants (AssertionError naming the first broken one): the\n"
"count, the load, every stored number below len(glist) whose item carries a str text\n"
"whose tag is the slot's, found at that slot from its home (no text twice), without a\n"
"free slot between. O(capacity).");

static PyObject *
GroupTable_check(PyObject *self, PyObject *unused)
{
    GroupTableObject *t = (GroupTableObject *)self;
    const char *bad = NULL;
    Py_ssize_t n = 0;
    if (!t->glist) {
        bad = "cleared";
    } else if (t->cap == 0) {
        if (t->used != 0 || t->tags || t->gids) bad = "no arrays but texts";
    } else if (t->cap < OA_MIN_CAP || t->used * 10 > t->cap * 7) {
        bad = "capacity below 8 or load above 0.7";
    }
    for (Py_ssize_t i = 0; !bad && i < t->cap; i++) {
        int32_t g = t->gids[i];
        if (g == GT_FREE) continue;
        n++;
        PyObject *s = gt_text_at(t, g);
        if (!s) {
            if (PyErr_Occurred()) return NULL;
            bad = "a number whose item carries no str text";
            break;
        }
        uint32_t tag;
        if (gt_tag_of(t, s, &tag) < 0) {
            Py_DECREF(s);
            return NULL;
        }
        Py_ssize_t at = gt_find(t, s, tag);
        Py_DECREF(s);
        if (tag != t->tags[i]) {
            bad = "a tag that is not its text's";
            break;
        }
        if (at != i) {
            bad = "a text twice, or not reachable from its home";
            break;
        }
        if (gt_gap(t, tag, i)) {
            bad = "a free slot between a text and its home";
            break;
        }
    }
    if (!bad && n != t->used) bad = "the count is not the texts'";
    if (bad) {
        PyErr_SetString(PyExc_AssertionError, bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
GroupTable_sizeof(PyObject *self, PyObject *unused)
{
    GroupTableObject *t = (GroupTableObject *)self;
    return PyLong_FromSsize_t((Py_ssize_t)Py_TYPE(self)->tp_basicsize +
                              t->cap * (Py_ssize_t)(sizeof(uint32_t) + sizeof(int32_t)));
}

static PyObject *
GroupTable_glist(PyObject *self, void *unused)
{
    PyObject *gl = ((GroupTableObject *)self)->glist;
    return Py_NewRef(gl ? gl : Py_None);
}

/* ==, != against another GroupTable or a dict: the same texts to the same numbers. */
static PyObject *
GroupTable_richcompare(PyObject *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) ||
        !(Py_IS_TYPE(other, &GroupTable_Type) || PyDict_Check(other))) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    GroupTableObject *t = (GroupTableObject *)self;
    int same = PyObject_Size(other) == t->used;
    if (PyErr_Occurred()) return NULL;
    for (Py_ssize_t i = 0; same && i < t->cap; i++) {
        int32_t g = t->gids[i];
        if (g == GT_FREE) continue;
        PyObject *s = gt_text_at(t, g);
        if (!s) {
            if (PyErr_Occurred()) return NULL;
            same = 0;
            break;
        }
        if (Py_IS_TYPE(other, &GroupTable_Type)) {
            GroupTableObject *o = (GroupTableObject *)other;
            uint32_t tag;
            Py_ssize_t j = gt_find_str(o, s, &tag);
            Py_DECREF(s);
            if (j == -2) return NULL;
            same = j >= 0 && o->gids[j] == g;
        } else {
            PyObject *v = PyDict_GetItemWithError(other, s); /* may run a key's __eq__ */
            Py_DECREF(s);
            if (!v && PyErr_Occurred()) return NULL;
            same = v && PyLong_CheckExact(v) && PyLong_AsLong(v) == g;
            if (PyErr_Occurred()) return NULL;
            if (t->cap == 0) break; /* cleared by that code */
        }
    }
    return PyBool_FromLong(op == Py_EQ ? same : !same);
}

/* ---- iteration: keys, values or items in slot order */

typedef struct {
    PyObject_HEAD
    GroupTableObject *table; /* NULL once exhausted */
    Py_ssize_t pos;
    uint64_t changes;
    int kind; /* 0 keys, 1 values, 2 items */
} GroupTableIterObject;

static PyObject *
gt_iter_new(PyObject *self, int kind)
{
    GroupTableIterObject *it = PyObject_GC_New(GroupTableIterObject, &GroupTableIter_Type);
    if (!it) return NULL;
    it->table = (GroupTableObject *)Py_NewRef(self);
    it->pos = 0;
    it->changes = ((GroupTableObject *)self)->changes;
    it->kind = kind;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *
GroupTable_iter(PyObject *self)
{
    return gt_iter_new(self, 0);
}

static PyObject *
GroupTable_keys(PyObject *self, PyObject *unused)
{
    return gt_iter_new(self, 0);
}

static PyObject *
GroupTable_values(PyObject *self, PyObject *unused)
{
    return gt_iter_new(self, 1);
}

static PyObject *
GroupTable_items(PyObject *self, PyObject *unused)
{
    return gt_iter_new(self, 2);
}

static PyObject *
GroupTableIter_next(PyObject *self)
{
    GroupTableIterObject *it = (GroupTableIterObject *)self;
    GroupTableObject *t = it->table;
    if (!t) return NULL;
    if (t->changes != it->changes) {
        PyErr_SetString(PyExc_RuntimeError, "GroupTable changed during iteration");
        return NULL;
    }
    it->pos = gt_next_used(t, it->pos);
    if (it->pos >= t->cap) {
        it->table = NULL;
        Py_DECREF(t);
        return NULL;
    }
    int32_t g = t->gids[it->pos++];
    PyObject *text = NULL;
    if (it->kind != 1) {
        text = gt_text_at(t, g);
        if (!text) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "GroupTable: a group lost its text");
            return NULL;
        }
        if (it->kind == 0) return text;
    }
    PyObject *num = PyLong_FromLong(g);
    if (!num || it->kind == 1) {
        Py_XDECREF(text);
        return num;
    }
    PyObject *pair = PyTuple_New(2);
    if (!pair) {
        Py_DECREF(text);
        Py_DECREF(num);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, text);
    PyTuple_SET_ITEM(pair, 1, num);
    return pair;
}

static int
GroupTableIter_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((GroupTableIterObject *)self)->table);
    return 0;
}

static int
GroupTableIter_clear(PyObject *self)
{
    Py_CLEAR(((GroupTableIterObject *)self)->table);
    return 0;
}

static void
GroupTableIter_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((GroupTableIterObject *)self)->table);
    PyObject_GC_Del(self);
}

static PyTypeObject GroupTableIter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.GroupTableIterator",
    .tp_basicsize = sizeof(GroupTableIterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = GroupTableIter_dealloc,
    .tp_traverse = GroupTableIter_traverse,
    .tp_clear = GroupTableIter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = GroupTableIter_next,
};

static PyMethodDef GroupTable_methods[] = {
    {"get", (PyCFunction)(void (*)(void))GroupTable_get, METH_FASTCALL, GroupTable_get_doc},
    {"append", GroupTable_append, METH_O, GroupTable_append_doc},
    {"index_from", GroupTable_index_from, METH_VARARGS, GroupTable_index_from_doc},
    {"reserve", GroupTable_reserve, METH_O, GroupTable_reserve_doc},
    {"keys", GroupTable_keys, METH_NOARGS, "keys() -> iterator of the texts, in slot order."},
    {"values", GroupTable_values, METH_NOARGS,
     "values() -> iterator of the group numbers, in slot order."},
    {"items", GroupTable_items, METH_NOARGS,
     "items() -> iterator of (text, group number), in slot order."},
    {"_check", GroupTable_check, METH_NOARGS, GroupTable_check_doc},
    {"__sizeof__", GroupTable_sizeof, METH_NOARGS, "The table's size in bytes, its arrays too."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef GroupTable_getset[] = {
    {"glist", GroupTable_glist, NULL, "The group list the texts are read from (None once cleared).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMappingMethods GroupTable_as_mapping = {
    .mp_length = GroupTable_len,
    .mp_subscript = GroupTable_subscript,
    .mp_ass_subscript = GroupTable_ass_subscript,
};

static PySequenceMethods GroupTable_as_sequence = {
    .sq_contains = GroupTable_contains,
};

PyDoc_STRVAR(GroupTable_doc,
"GroupTable(glist, entry_slot, memory_slot, text_slot[, tag_mask])\n\n"
"The word-overlap index's text -> group number map (wordoverlap/knobs._GROUP_TABLE):\n"
"an open-addressing table of 8 bytes a slot (a 32-bit tag of the text's hash and the\n"
"number as an int32) at a load of 0.5-0.7, the text read back from glist[number] (a\n"
"record of entry_slot's class: rec.entry.memory; or an object of text_slot's class:\n"
"its text) when a tag matches. glist: a list (held); the slots: the member descriptors\n"
"Record.entry, MemoryEntry.memory and _Group.text. Keys are str (a subclass as its str\n"
"value: no user code runs in a probe; other keys are absent for reads, TypeError for\n"
"writes); table[text] = g needs glist[g] to carry text and 0 <= g < 2**31 - 1\n"
"(ValueError before any change). get / [] / in / del / len / iteration / == as a dict's,\n"
"O(1) expected, except that iteration is in slot order and raises RuntimeError once a\n"
"text came or went since it began. tag_mask (tests only) keeps fewer tag bits.");

static PyTypeObject GroupTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "actormem._index._cwordoverlap.GroupTable",
    .tp_basicsize = sizeof(GroupTableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = GroupTable_doc,
    .tp_new = GroupTable_new,
    .tp_dealloc = GroupTable_dealloc,
    .tp_traverse = GroupTable_traverse,
    .tp_clear = GroupTable_tp_clear,
    .tp_iter = GroupTable_iter,
    .tp_richcompare = GroupTable_richcompare,
    .tp_methods = GroupTable_methods,
    .tp_getset = GroupTable_getset,
    .tp_as_mapping = &GroupTable_as_mapping,
    .tp_as_sequence = &GroupTable_as_sequence,
    .tp_hash = PyObject_HashNotImplemented,
};

/* Add the two types to module m: 0, or -1 with an exception. */
static int
gt_module_add(PyObject *m)
{
    if (PyType_Ready(&GroupTable_Type) < 0 || PyType_Ready(&GroupTableIter_Type) < 0) return -1;
    return PyModule_AddObjectRef(m, "GroupTable", (PyObject *)&GroupTable_Type);
}
