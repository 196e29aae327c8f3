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

/* The value fold_hash returns for the chain h: in [0, 2**62). */
static inline uint64_t
fold_hash_final(uint64_t h)
{
    h ^= h >> 31;
    return h & ((1ull << 62) - 1);
}

#endif
