/* admin_guard.h - a back-off for failed admin authentication: per client
 * address (an IPv6 /64 counts as one; a wait that doubles after a few
 * failures), and for all addresses together (a cap on failures per
 * second), since a guesser may own many addresses. It answers wrong
 * guesses only: the right token is compared first and always served, so
 * guesses from anywhere can never lock the admin out. */
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
 * holds this many and refills at this rate): once spent, every wrong guess
 * is answered 429, whatever its address. */
#define ADMIN_GUARD_GLOBAL_PER_S 20
typedef enum admin_guard_verdict {
    ADMIN_GUARD_OPEN = 0,    /* a plain wrong token: 401 */
    ADMIN_GUARD_ADDRESS = 1, /* this address failed too often: 429, it waits */
    ADMIN_GUARD_GLOBAL = 2   /* all addresses together failed too often: 429 */
} admin_guard_verdict;

/* Called only after the token was compared and found wrong: a right token
 * is never refused, whoever else guesses (the token's length is what makes
 * guessing hopeless: config.h, CONFIG_MIN_ADMIN_TOKEN). Counts the failure
 * for addr (an IPv6 address by its /64: one host owns a whole /64) and for
 * all addresses, and says how to answer; *retry_s gets the whole seconds
 * to wait (at least 1) unless OPEN. A NULL addr (unknown) counts for all
 * addresses only. Thread-safe. */
admin_guard_verdict admin_guard_failed(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s);
/* The right token: addr starts again from zero. */
void admin_guard_succeeded(const struct sockaddr *addr);

#endif /* APP_ADMIN_GUARD_H */
