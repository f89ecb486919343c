/* admin_guard.h - a back-off for failed admin authentication, per client
 * address (peer.h's key: an IPv6 client by its /64; behind a trusted
 * proxy, the client it names). After a few failures an address must wait,
 * and the wait doubles with every further failure. While it waits, every
 * attempt from it is refused, the right token too. So a 429 tells a
 * guesser nothing, and the back-off bounds how fast one address can guess.
 * The real admin is never locked out by others: the wait is per address.
 * There is no cap over all addresses (it would let guessers lock the admin
 * out): what makes guessing hopeless across many addresses is the token's
 * length (config.h, CONFIG_MIN_ADMIN_TOKEN). */
#ifndef APP_ADMIN_GUARD_H
#define APP_ADMIN_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

/* Failures an address may make in a row before it must wait. */
#define ADMIN_GUARD_FREE_TRIES 5
/* The first wait, doubled by every further failure, up to the cap. */
#define ADMIN_GUARD_FIRST_WAIT_MS 1000
#define ADMIN_GUARD_MAX_WAIT_MS 60000
/* Addresses remembered; when full, a record that is not waiting (the one
 * whose last failure is oldest) is reused first. */
#define ADMIN_GUARD_ADDRESSES 4096

/* Before the token is compared: 0 when addr may try, or -1 while it waits,
 * with *retry_s the whole seconds left (at least 1). A NULL addr (unknown)
 * may always try. Thread-safe. */
int admin_guard_check(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s);
/* A wrong token from addr: counted, and from the ADMIN_GUARD_FREE_TRIES-th
 * failure on addr waits. Thread-safe. */
void admin_guard_failed(const struct sockaddr *addr, int64_t now_ms);
/* The right token: addr starts again from zero. */
void admin_guard_succeeded(const struct sockaddr *addr);

#endif /* APP_ADMIN_GUARD_H */
