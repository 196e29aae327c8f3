/* The duplicate key's fold hash over an ASCII text's bytes: one formula for the word
 * overlap core (_cwordoverlap.c fold_hash's table path) and the row reader's thread
 * (_crows.c, without the GIL).
 *
 * fold(text) = ' '.join(text.casefold().split()); over ASCII bytes casefold is the
 * lower-casing of A-Z and str.split's whitespace is ' ', 0x09-0x0D and 0x1C-0x1F. The
 * hash is FNV-1a-like over the fold's code points (a space for each run of whitespace
 * between two characters), then fold_hash_final. Needs no Python object. */
#ifndef ACTORMEM_FOLDHASH_H
#define ACTORMEM_FOLDHASH_H

#include <stddef.h>
#include <stdint.h>

#define FOLD_HASH_SEED 0xcbf29ce484222325ull

static inline uint64_t
fold_hash_mix(uint64_t h, uint32_t c)
{
    return (h ^ c) * 0x100000001b3ull;
}

/* A byte lower-cased, 0xFF for str.split's ASCII whitespace (bytes above 127 are
 * never read through it). */
static inline void
fold_hash_table_init(unsigned char tab[256])
{
    for (int c = 0; c < 256; c++) {
        int space = c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
        tab[c] = space ? 0xFF
                 : (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A'))
                                          : (unsigned char)c;
    }
}

/* The chain over n ASCII bytes from h (leading whitespace skipped, a run of it before
 * a character giving the one space). */
static inline uint64_t
fold_hash_ascii_chain(uint64_t h, const unsigned char *s, size_t n, const unsigned char tab[256])
{
    size_t i = 0;
    int gap = 0;
    while (i < n && tab[s[i]] == 0xFF) i++;
    for (; i < n; i++) {
        unsigned t = tab[s[i]];
        if (t == 0xFF) {
            gap = 1;
            continue;
        }
        if (gap) {
            h = fold_hash_mix(h, ' ');
            gap = 0;
        }
        h = fold_hash_mix(h, t);
    }
    return h;
}

/* One byte of a chain past its leading whitespace (fold_hash_ascii_chain's loop body):
 * h and the pending-space flag *gap. */
static inline uint64_t
fold_hash_ascii_step(uint64_t h, unsigned t, int *gap)
{
    if (t == 0xFF) {
        *gap = 1;
        return h;
    }
    if (*gap) {
        h = fold_hash_mix(h, ' ');
        *gap = 0;
    }
    return fold_hash_mix(h, t);
}

/* fold_hash_ascii_chain from FOLD_HASH_SEED over two texts at once, into *out1 and
 * *out2 (each the chain's value, before fold_hash_final): the two chains' bytes
 * interleaved while both last, so that their multiplies overlap (each chain alone is a
 * multiply per byte waiting on the one before: the row reader's thread spent ~0.37 s of
 * a 1M open, 240 MB of text, in it). The same values as two single calls. */
static inline void
fold_hash_ascii_pair(const unsigned char *s1, size_t n1, uint64_t *out1,
                     const unsigned char *s2, size_t n2, uint64_t *out2,
                     const unsigned char tab[256])
{
    uint64_t h1 = FOLD_HASH_SEED, h2 = FOLD_HASH_SEED;
    size_t i1 = 0, i2 = 0;
    int gap1 = 0, gap2 = 0;
    while (i1 < n1 && tab[s1[i1]] == 0xFF) i1++;
    while (i2 < n2 && tab[s2[i2]] == 0xFF) i2++;
    while (i1 < n1 && i2 < n2) {
        h1 = fold_hash_ascii_step(h1, tab[s1[i1++]], &gap1);
        h2 = fold_hash_ascii_step(h2, tab[s2[i2++]], &gap2);
    }
    for (; i1 < n1; i1++) h1 = fold_hash_ascii_step(h1, tab[s1[i1]], &gap1);
    for (; i2 < n2; i2++) h2 = fold_hash_ascii_step(h2, tab[s2[i2]], &gap2);
    *out1 = h1;
    *out2 = h2;
}

/* The value fold_hash returns for the chain h: in [0, 2**62). */
static inline uint64_t
fold_hash_final(uint64_t h)
{
    h ^= h >> 31;
    return h & ((1ull << 62) - 1);
}

#if defined(Py_PYTHON_H) && PY_VERSION_HEX < 0x030D0000
/* fold_hash's value over a text given as UTF-8 bytes (any text: its code points folded
 * as str.casefold maps them, _cwordoverlap.c fold_hash_chain's loop for a str that is
 * not ASCII; an ASCII code point by `tab`). Reads CPython's static case and space
 * tables only: callable without the GIL. 1 with *out set, or 0 when the bytes are not
 * strict UTF-8 (a surrogate, an overlong form, a sequence cut short). */
static inline int
fold_hash_utf8(const unsigned char *s, size_t n, const unsigned char tab[256], uint64_t *out)
{
    uint64_t h = FOLD_HASH_SEED;
    int gap = 0, any = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i], lo = 0x80, hi = 0xBF;
        int more;
        if (c < 0x80) {
            i++;
            unsigned t = tab[c];
            if (t == 0xFF) {
                gap = 1;
                continue;
            }
            if (gap && any) h = fold_hash_mix(h, ' ');
            gap = 0;
            any = 1;
            h = fold_hash_mix(h, t);
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
            c &= 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F; /* no surrogates */
            c &= 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
            c &= 0x07;
        } else {
            return 0;
        }
        if (n - i <= (size_t)more) return 0;
        for (int k = 1; k <= more; k++) {
            uint32_t b = s[i + k];
            if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
            c = c << 6 | (b & 0x3F);
        }
        i += (size_t)more + 1;
        Py_UCS4 m[3];
        int folded = _PyUnicode_ToFoldedFull((Py_UCS4)c, m);
        for (int j = 0; j < folded; j++) {
            if (Py_UNICODE_ISSPACE(m[j])) {
                gap = 1;
                continue;
            }
            if (gap && any) h = fold_hash_mix(h, ' ');
            gap = 0;
            any = 1;
            h = fold_hash_mix(h, (uint32_t)m[j]);
        }
    }
    *out = fold_hash_final(h);
    return 1;
}
#endif

#endif
