/* sha1.c - SHA-1 (FIPS 180-4), only to name our Lua scripts for EVALSHA.
 *
 * Redis identifies a cached script by the SHA-1 of its body. Computing it
 * here, once per client, saves the SCRIPT LOAD round trip per connection;
 * SHA-1's collision weakness is irrelevant since we hash our own constants. */
#include "dlock_internal.h"

#include <string.h>

typedef struct sha1_ctx {
    uint32_t h[5];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} sha1_ctx;

static uint32_t rol(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(sha1_ctx *s, const unsigned char *p)
{
    uint32_t w[80];
    uint32_t a, b, c, d, e;

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    a = s->h[0];
    b = s->h[1];
    c = s->h[2];
    d = s->h[3];
    e = s->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k, t;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdcu;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6u;
        }
        t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
}

static void sha1_update(sha1_ctx *s, const unsigned char *p, size_t len)
{
    s->bytes += len;
    while (len > 0) {
        size_t take = 64 - s->used < len ? 64 - s->used : len;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        len -= take;
        if (s->used == 64) {
            sha1_block(s, s->block);
            s->used = 0;
        }
    }
}

void dlock__sha1_hex(const void *data, size_t len, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    sha1_ctx s = {{0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u}, 0, {0}, 0};
    unsigned char pad[72] = {0x80};
    unsigned char lenbe[8];
    uint64_t bits;
    size_t padlen;

    sha1_update(&s, data, len);
    bits = s.bytes * 8;
    padlen = s.used < 56 ? 56 - s.used : 120 - s.used;
    for (int i = 0; i < 8; i++)
        lenbe[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_update(&s, pad, padlen);
    sha1_update(&s, lenbe, 8);
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 4; j++) {
            unsigned char byte = (unsigned char)(s.h[i] >> (24 - 8 * j));
            out[8 * i + 2 * j] = hex[byte >> 4];
            out[8 * i + 2 * j + 1] = hex[byte & 0x0f];
        }
    }
    out[40] = '\0';
}
