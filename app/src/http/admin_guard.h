/* admin_guard.h - a back-off for failed admin authentication, per client
 * address, so the admin token cannot be guessed at network speed. */
#ifndef APP_ADMIN_GUARD_H
#define APP_ADMIN_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

/* Failures an address may make in a row before it must wait. */
#define ADMIN_GUARD_FREE_TRIES 5
/* The first wait, doubled by every further failure, up to the cap. */
#define ADMIN_GUARD_FIRST_WAIT_MS 1000
#define ADMIN_GUARD_MAX_WAIT_MS 60000

/* 1 when addr must wait (*retry_s: whole seconds left, at least 1), else 0.
 * A NULL addr (unknown) is never blocked. Thread-safe. */
int admin_guard_blocked(const struct sockaddr *addr, int64_t now_ms, unsigned *retry_s);
/* A failed attempt from addr; may start or lengthen its wait. */
void admin_guard_failed(const struct sockaddr *addr, int64_t now_ms);
/* A successful attempt: addr starts again from zero failures. */
void admin_guard_succeeded(const struct sockaddr *addr);

#endif /* APP_ADMIN_GUARD_H */
