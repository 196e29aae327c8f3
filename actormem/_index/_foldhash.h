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

/* The bytes fold_hash_ascii_chain mixes for the n bytes at s, in order, written to out
 * (room for n): each byte through tab, a run of whitespace (0xFF) as one ' ', none
 * before the first other byte or after the last. Returns their count. Branch-free: the
 * chain's per-byte branches (a word's end every ~6 bytes) mispredict. ' ' comes only
 * from whitespace (tab[' '] is 0xFF), so a last ' ' is a trailing run's. */
static inline size_t
fold_ascii_compact(const unsigned char *s, size_t n, const unsigned char tab[256],
                   unsigned char *out)
{
    size_t j = 0;
    unsigned prev_sp = 1; /* leading whitespace dropped: as if after a space */
    for (size_t i = 0; i < n; i++) {
        unsigned t = tab[s[i]];
        unsigned sp = t == 0xFF;
        out[j] = (unsigned char)(t - sp * (0xFFu - ' ')); /* 0xFF -> ' ': no select */
        j += !(sp & prev_sp);
        prev_sp = sp;
    }
    return j - (j && out[j - 1] == ' ');
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define FOLD_HAVE_X512 1
/* Whether this CPU runs fold_ascii_compact_x512 (AVX-512 BW and VBMI2). O(1). */
static inline int
fold_x512_usable(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi2");
}

/* fold_ascii_compact with fold_hash_table_init's table, for bytes below 0x80 (an ASCII
 * text), 64 bytes a step: the whitespace and capitals found by compares, a run's later
 * whitespace dropped by a mask, the rest packed by vpcompressb (into a register, then
 * stored whole: a compress straight to memory is slow on some CPUs). out: room for
 * n + 64 bytes (the last store's spill). The same bytes and count. */
__attribute__((target("avx512f,avx512bw,avx512vbmi2"))) static inline size_t
fold_ascii_compact_x512(const unsigned char *s, size_t n, unsigned char *out)
{
    const __m512i space = _mm512_set1_epi8(' ');
    const __m512i tab0 = _mm512_set1_epi8(0x09), tab_n = _mm512_set1_epi8(4);
    const __m512i fs0 = _mm512_set1_epi8(0x1C), fs_n = _mm512_set1_epi8(3);
    const __m512i cap0 = _mm512_set1_epi8('A'), cap_n = _mm512_set1_epi8(25);
    const __m512i lower = _mm512_set1_epi8('a' - 'A');
    uint64_t carry = 1; /* the byte before was whitespace (none before the first) */
    size_t j = 0;
    for (size_t i = 0; i < n; i += 64) {
        size_t m = n - i < 64 ? n - i : 64;
        __mmask64 in = m == 64 ? ~(__mmask64)0 : (((__mmask64)1 << m) - 1);
        __m512i v = _mm512_maskz_loadu_epi8(in, s + i);
        __mmask64 ws = _mm512_cmpeq_epi8_mask(v, space) |
                       _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, tab0), tab_n) |
                       _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, fs0), fs_n);
        ws &= in;
        __mmask64 caps = _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, cap0), cap_n);
        v = _mm512_mask_add_epi8(v, caps, v, lower);
        v = _mm512_mask_mov_epi8(v, ws, space);
        __mmask64 keep = in & ~(ws & ((ws << 1) | carry));
        carry = ws >> 63;
        _mm512_storeu_si512((void *)(out + j), _mm512_maskz_compress_epi8(keep, v));
        j += (size_t)__builtin_popcountll(keep);
    }
    return j - (j && out[j - 1] == ' ');
}
#endif

/* fold_hash_ascii_chain from FOLD_HASH_SEED over each of k ASCII texts (s[i], n[i]),
 * into out[i] (the chain, before fold_hash_final): the texts compacted into buf (room
 * for the sum of n, plus 64 bytes) by fold_ascii_compact (wide, on a CPU where
 * fold_x512_usable: fold_ascii_compact_x512, the table being fold_hash_table_init's), then their plain FNV chains four at a time,
 * a lane taking the next text as soon as its own ends (the last few alone). The same
 * values. The sum of n must be below 2**32 (offsets kept in 32 bits). O(sum of n). */
static inline void
fold_hash_ascii_many(const unsigned char *const *s, const size_t *n, size_t k, uint64_t *out,
                     const unsigned char tab[256], unsigned char *buf, int wide)
{
    const uint64_t prime = 0x100000001b3ull;
    size_t at = 0;
    for (size_t i = 0; i < k; i++) { /* out[i]: its compacted bytes' offset and count */
#ifdef FOLD_HAVE_X512
        size_t m = wide ? fold_ascii_compact_x512(s[i], n[i], buf + at)
                        : fold_ascii_compact(s[i], n[i], tab, buf + at);
#else
        (void)wide;
        size_t m = fold_ascii_compact(s[i], n[i], tab, buf + at);
#endif
        out[i] = (uint64_t)at << 32 | (uint64_t)m;
        at += m;
    }
    const unsigned char *p[4] = {NULL, NULL, NULL, NULL}, *e[4] = {NULL, NULL, NULL, NULL};
    uint64_t h[4] = {0, 0, 0, 0};
    size_t who[4] = {0, 0, 0, 0};
    size_t next = 0;
    int live = 0;
    for (; live < 4 && next < k; live++, next++) {
        p[live] = buf + (out[next] >> 32);
        e[live] = p[live] + (out[next] & 0xFFFFFFFFu);
        h[live] = FOLD_HASH_SEED;
        who[live] = next;
    }
    while (live == 4) {
        size_t steps = (size_t)(e[0] - p[0]);
        for (int l = 1; l < 4; l++)
            if ((size_t)(e[l] - p[l]) < steps) steps = (size_t)(e[l] - p[l]);
        uint64_t h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
        const unsigned char *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
        for (size_t j = 0; j < steps; j++) {
            h0 = (h0 ^ p0[j]) * prime;
            h1 = (h1 ^ p1[j]) * prime;
            h2 = (h2 ^ p2[j]) * prime;
            h3 = (h3 ^ p3[j]) * prime;
        }
        h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
        for (int l = 0; l < 4; l++) {
            p[l] += steps;
            if (p[l] != e[l]) continue;
            out[who[l]] = h[l];
            if (next < k) { /* the lane's next text */
                p[l] = buf + (out[next] >> 32);
                e[l] = p[l] + (out[next] & 0xFFFFFFFFu);
                h[l] = FOLD_HASH_SEED;
                who[l] = next++;
            } else {
                p[l] = e[l] = NULL;
                live--;
            }
        }
    }
    for (int l = 0; l < 4; l++) { /* the lanes left, one at a time */
        if (!p[l]) continue;
        uint64_t hl = h[l];
        for (const unsigned char *q = p[l]; q < e[l]; q++) hl = (hl ^ *q) * prime;
        out[who[l]] = hl;
    }
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
