/* admin_guard.h - a back-off for failed admin authentication, so that the
 * admin token cannot be guessed at network speed: per exact client address
 * (a wait that doubles after a few failures), and for all addresses
 * together (a cap on failed attempts per second), since an attacker may
 * own many addresses (a whole /8 on loopback, a /64 of IPv6). */
#ifndef APP_ADMIN_GUARD_H
#define APP_ADMIN_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

/* Failures an address may make in a row before it must wait. */
#define ADMIN_GUARD_FREE_TRIES 5
/* The first wait, doubled by every further failure, up to the cap. */
#define ADMIN_GUARD_FIRST_WAIT_MS 1000
#define ADMIN_GUARD_MAX_WAIT_MS 60000
/* Addresses remembered; when full, the one whose last failure is oldest
 * is forgotten. With the global cap, filling the table takes at least
 * ADMIN_GUARD_ADDRESSES / ADMIN_GUARD_GLOBAL_PER_S s (204 s), longer than
 * the longest wait, so no address can be pushed out while it waits. */
#define ADMIN_GUARD_ADDRESSES 4096
/* Failed attempts per second from all addresses together (a bucket that
 * holds this many and refills at this rate): once spent, every admin
 * attempt waits, whatever its address. */
#define ADMIN_GUARD_GLOBAL_PER_S 20
typedef enum admin_guard_verdict {
    ADMIN_GUARD_OPEN = 0,    /* go on and compare the token */
    ADMIN_GUARD_ADDRESS = 1, /* this address failed too often: it waits */
    ADMIN_GUARD_GLOBAL = 2   /* all addresses together failed too often: everyone waits */
} admin_guard_verdict;

/* Before the token is compared. On ADMIN_GUARD_OPEN one failure of the
 * global budget is held for this attempt, and exactly one of
 * admin_guard_failed, admin_guard_succeeded or admin_guard_cancel must
 * follow to settle it (so that concurrent guesses cannot pass the cap
 * together). Otherwise *retry_s gets the whole seconds to wait (at least 1).
 * A NULL addr (unknown) has no record of its own; the global cap still
 * applies. Thread-safe. */
admin_guard_verdict admin_guard_enter(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s);
/* A wrong token: spends the held failure, and may start or lengthen the
 * address's wait. */
void admin_guard_failed(const struct sockaddr *addr, int64_t now_ms);
/* The right token: gives the held failure back; addr starts again from zero. */
void admin_guard_succeeded(const struct sockaddr *addr);
/* No guess was made (a malformed header): gives the held failure back. */
void admin_guard_cancel(void);

#endif /* APP_ADMIN_GUARD_H */
