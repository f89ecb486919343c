/* token.c - kernel randomness and the per-acquisition 128-bit lock token. */
#include "dlock_internal.h"

#include <errno.h>
#include <sys/random.h>

/* Fills buf from getrandom(), the kernel's CSPRNG (Linux >= 3.17, glibc >=
 * 2.25: every Debian 12 system), without a file descriptor to open. Blocks
 * only until the pool is first seeded at boot. Returns 0, or -1 when the
 * kernel refuses (ENOSYS under a seccomp filter that forbids it): then no
 * token is made, rather than a guessable one. */
int dlock__random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t r = getrandom(p + got, len - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        /* A signal before the first byte: just ask again. */
        if (r < 0 && errno == EINTR)
            continue;
        return -1;
    }
    return 0;
}

/* 128 random bits as 32 lowercase hex digits. The token is the lock's
 * owner signature: release and extend act only when the key still holds
 * it. So a client whose lock expired (a long GC pause, a slow request)
 * cannot delete or prolong the lock a second client acquired since. That
 * is the "false deletion" of seed 001, and why the distlock page asks for
 * a random value unique across all clients and all acquisitions. */
int dlock__token_new(char out[DLOCK_TOKEN_LEN])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];

    if (dlock__random_bytes(raw, sizeof(raw)) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(raw); i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[32] = '\0';
    return 0;
}
