/* BLAKE2b (RFC 7693), unkeyed, digest of 1-64 bytes: the same digest as Python's
 * hashlib.blake2b(digest_size=n) for the same bytes. Plain C, no Python API, so it runs
 * without the GIL. Written from the RFC's description (the reference code's
 * structure: a 128-byte buffer that is compressed only once more input comes, so the
 * last block is compressed with the final flag). */
#ifndef ACTORMEM_BLAKE2B_H
#define ACTORMEM_BLAKE2B_H

#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t h[8];
    uint64_t t[2];
    uint8_t buf[128];
    size_t buflen;
    size_t outlen;
} am_b2b;

static const uint64_t am_b2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t am_b2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t
am_b2b_rotr(uint64_t x, int n)
{
    return (x >> n) | (x << (64 - n));
}

static inline uint64_t
am_b2b_load64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
#endif
}

#define AM_B2B_G(a, b, c, d, x, y)                                                        \
    do {                                                                                  \
        v[a] = v[a] + v[b] + (x);                                                         \
        v[d] = am_b2b_rotr(v[d] ^ v[a], 32);                                              \
        v[c] = v[c] + v[d];                                                               \
        v[b] = am_b2b_rotr(v[b] ^ v[c], 24);                                              \
        v[a] = v[a] + v[b] + (y);                                                         \
        v[d] = am_b2b_rotr(v[d] ^ v[a], 16);                                              \
        v[c] = v[c] + v[d];                                                               \
        v[b] = am_b2b_rotr(v[b] ^ v[c], 63);                                              \
    } while (0)

static void
am_b2b_compress(am_b2b *S, const uint8_t *block, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = am_b2b_load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = S->h[i];
        v[i + 8] = am_b2b_iv[i];
    }
    v[12] ^= S->t[0];
    v[13] ^= S->t[1];
    if (last) v[14] = ~v[14];
    /* the rounds written out, so that every message index is a constant */
#define AM_B2B_ROUND(r)                                                                   \
    do {                                                                                  \
        AM_B2B_G(0, 4, 8, 12, m[am_b2b_sigma[r][0]], m[am_b2b_sigma[r][1]]);              \
        AM_B2B_G(1, 5, 9, 13, m[am_b2b_sigma[r][2]], m[am_b2b_sigma[r][3]]);              \
        AM_B2B_G(2, 6, 10, 14, m[am_b2b_sigma[r][4]], m[am_b2b_sigma[r][5]]);             \
        AM_B2B_G(3, 7, 11, 15, m[am_b2b_sigma[r][6]], m[am_b2b_sigma[r][7]]);             \
        AM_B2B_G(0, 5, 10, 15, m[am_b2b_sigma[r][8]], m[am_b2b_sigma[r][9]]);             \
        AM_B2B_G(1, 6, 11, 12, m[am_b2b_sigma[r][10]], m[am_b2b_sigma[r][11]]);           \
        AM_B2B_G(2, 7, 8, 13, m[am_b2b_sigma[r][12]], m[am_b2b_sigma[r][13]]);            \
        AM_B2B_G(3, 4, 9, 14, m[am_b2b_sigma[r][14]], m[am_b2b_sigma[r][15]]);            \
    } while (0)
    AM_B2B_ROUND(0);
    AM_B2B_ROUND(1);
    AM_B2B_ROUND(2);
    AM_B2B_ROUND(3);
    AM_B2B_ROUND(4);
    AM_B2B_ROUND(5);
    AM_B2B_ROUND(6);
    AM_B2B_ROUND(7);
    AM_B2B_ROUND(8);
    AM_B2B_ROUND(9);
    AM_B2B_ROUND(10);
    AM_B2B_ROUND(11);
#undef AM_B2B_ROUND
    for (int i = 0; i < 8; i++) S->h[i] ^= v[i] ^ v[i + 8];
}

static inline void
am_b2b_count(am_b2b *S, uint64_t inc)
{
    S->t[0] += inc;
    if (S->t[0] < inc) S->t[1]++;
}

/* outlen in 1..64 (the caller checks) */
static void
am_b2b_init(am_b2b *S, size_t outlen)
{
    memset(S, 0, sizeof *S);
    for (int i = 0; i < 8; i++) S->h[i] = am_b2b_iv[i];
    S->h[0] ^= 0x01010000ULL ^ (uint64_t)outlen; /* fanout 1, depth 1, no key */
    S->outlen = outlen;
}

static void
am_b2b_update(am_b2b *S, const void *data, size_t inlen)
{
    const uint8_t *in = (const uint8_t *)data;
    if (inlen == 0) return;
    size_t left = S->buflen, fill = 128 - left;
    if (inlen > fill) { /* the buffer fills and more follows: compress it */
        S->buflen = 0;
        memcpy(S->buf + left, in, fill);
        am_b2b_count(S, 128);
        am_b2b_compress(S, S->buf, 0);
        in += fill;
        inlen -= fill;
        while (inlen > 128) {
            am_b2b_count(S, 128);
            am_b2b_compress(S, in, 0);
            in += 128;
            inlen -= 128;
        }
    }
    memcpy(S->buf + S->buflen, in, inlen);
    S->buflen += inlen;
}

static void
am_b2b_final(am_b2b *S, uint8_t *out)
{
    am_b2b_count(S, (uint64_t)S->buflen);
    memset(S->buf + S->buflen, 0, 128 - S->buflen);
    am_b2b_compress(S, S->buf, 1);
    for (size_t i = 0; i < S->outlen; i++) out[i] = (uint8_t)(S->h[i / 8] >> (8 * (i % 8)));
}

#endif
