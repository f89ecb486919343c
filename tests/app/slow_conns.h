/* slow_conns.h - the slow-client attacker of app_slowloris and
 * app_attacks: one thread holding as many connections as it can from a
 * few source addresses (127.0.0.<first_addr ...>). Each sends a slow
 * request head, a slow body or slow keep-alive traffic. Every connection
 * the server closes is reopened REOPEN_MS later. */
#ifndef TESTS_APP_SLOW_CONNS_H
#define TESTS_APP_SLOW_CONNS_H

#include <stdatomic.h>
#include <stdint.h>

#include "procs.h"

#define SLOW_MAX_SLOTS 1200

typedef enum slow_kind {
    SLOW_HEAD,     /* a header byte a second, the head never ends */
    SLOW_BODY,     /* Content-Length: 10000, a body byte every 2 s */
    SLOW_KEEPALIVE /* a whole valid GET /metrics every 20 s */
} slow_kind;

typedef struct slow_slot {
    int fd;
    int64_t next_ms;   /* when this connection sends its next bytes */
    int opened;        /* its opening went out */
    int64_t reopen_ms; /* closed: when it reconnects */
} slow_slot;

typedef struct slow_attack {
    const server_proc *srv;
    slow_kind kind;
    int first_addr;      /* the source addresses: 127.0.0.first_addr ... */
    int addrs, per_addr; /* addrs * per_addr <= SLOW_MAX_SLOTS connections */
    atomic_int stop;
    atomic_int open;     /* connections currently open */
    atomic_long opened;  /* connections opened in all (reopens included) */
    slow_slot slots[SLOW_MAX_SLOTS];
} slow_attack;

/* The attack's thread (pthread_create with a slow_attack *, heap-allocated:
 * it is large); runs until stop is set, then closes everything. */
void *slow_attack_main(void *arg);

#endif /* TESTS_APP_SLOW_CONNS_H */
