/* haproxy_proc.h - HAProxy as production runs it, for the suites that test
 * the front. The configuration is written by scripts/lib/haproxy.sh (the
 * shipped one, unchanged). `haproxy -db -f CFG` is started in a temp dir of
 * its own, its log (stderr, `log stderr`) in a file there, stopped by PID. */
#ifndef TESTS_APP_HAPROXY_PROC_H
#define TESTS_APP_HAPROXY_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "procs.h"

typedef struct haproxy_proc {
    pid_t pid;          /* 0 when not running */
    server_proc front;  /* its bind, 127.0.0.1:<free port>, as a server_proc for raw_conn.h */
    char dir[256];      /* temp dir: haproxy.cfg, errors/, haproxy.log; removed by haproxy_stop */
    char cfg[320];      /* the haproxy.cfg haproxy_config wrote */
    char log[320];      /* haproxy's stdout and stderr */
} haproxy_proc;

/* The haproxy binary (PATH, then /usr/sbin and /usr/local/sbin) into out:
 * 0, or -1 when it is not installed. */
int haproxy_find(char *out, size_t len);

/* Writes the configuration for n servers with haproxy_config from
 * $DLOCK_SOURCE_DIR/scripts/lib/haproxy.sh, bound on 127.0.0.1:<free
 * port>; applies the sed expression $APP_FRONT_HAPROXY_SED to it when set
 * (to run a test against a broken configuration by hand, e.g.
 * 's/http-reuse safe/http-reuse never/'); checks it with haproxy -c;
 * starts haproxy -db -f on it and waits (bounded, 10 s) until it accepts
 * connections. 0, or -1 with why (and nothing left running). */
int haproxy_start(haproxy_proc *h, const server_proc *const *servers, size_t n, char *why, size_t whylen);

/* SIGTERM, bounded wait, SIGKILL; removes the temp dir. Safe when not
 * running or never started. */
void haproxy_stop(haproxy_proc *h);

/* How many times needle occurs in haproxy's log so far. */
int haproxy_log_count(const haproxy_proc *h, const char *needle);

#endif /* TESTS_APP_HAPROXY_PROC_H */
