/* tls_procs.h - TLS test fixtures on real processes: a CA and certificates
 * made by openssl in a temp dir, and redis-server listening on a TLS port
 * only (--port 0 --tls-port P), started and stopped by PID. Every function
 * returns 0, or -1 after one line on stderr saying why. */
#ifndef TESTS_TLS_PROCS_H
#define TESTS_TLS_PROCS_H

#include <stddef.h>
#include <sys/types.h>

/* In dir: ca.crt/.key (the CA), server.crt/.key (localhost and 127.0.0.1,
 * signed by the CA), client.crt/.key (signed by the CA), other.crt (a CA
 * that signed none of them). */
int tls_make_certs(const char *dir);

typedef struct tls_redis {
    pid_t pid;          /* 0 when not running */
    int port;
    char addr[64];      /* "127.0.0.1:<port>" */
} tls_redis;

/* redis-server (from $DLOCK_REDIS_SERVER, else PATH) on a free loopback
 * TLS port with dir's server certificate, trusting dir's CA for clients;
 * auth_clients "yes" (a client certificate is required) or "no". Waits
 * (bounded, 5 s) until the port takes connections. */
int tls_redis_start(tls_redis *r, const char *dir, const char *auth_clients);
/* SIGTERM (SIGCONT first), bounded wait, SIGKILL. Safe when not running. */
void tls_redis_stop(tls_redis *r);

/* Redis Sentinel on a TLS port only, monitoring master_name at
 * 127.0.0.1:master_port over TLS (tls-replication yes), quorum 1; its own
 * dir below dir. Waits (bounded, 5 s) until the port takes connections.
 * Stopped with tls_redis_stop. */
int tls_sentinel_start(tls_redis *s, const char *dir, const char *master_name, int master_port);

#endif
