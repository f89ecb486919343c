/* procs.h - test support: everything in procs_base.h (ports, the clock,
 * temp dirs, redis-server and Sentinel processes, running a command), plus
 * real coupon-server and postgres processes and a small HTTP client (the
 * testsupport library: libcurl, libpq).
 *
 * Every function returns 0 on success and -1 on failure after printing one
 * line saying why to stderr. Every process started here is stopped by its
 * PID (SIGTERM, bounded waitpid, then SIGKILL); nothing is left running. */
#ifndef TESTS_PROCS_H
#define TESTS_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procs_base.h"

typedef struct pg_proc {
    pid_t pid;          /* the postmaster, 0 when not running */
    int port;           /* on 127.0.0.1 */
    char dir[256];      /* own temp dir: data/, the socket, the logs; removed by pg_stop */
    char url[128];      /* "postgresql://postgres@127.0.0.1:<port>/postgres" */
} pg_proc;

/* The PostgreSQL server binaries (postgres, initdb): $DLOCK_PG_BINDIR, else
 * the highest /usr/lib/postgresql/<major>/bin. 0, or -1 when absent (the
 * suites then skip, saying so). */
int pg_bindir(char *out, size_t len);
/* initdb (trust auth, user postgres) into a fresh temp dir and start
 * postgres on a free loopback port; waits until it accepts connections
 * (bounded). As root, both run as `nobody` ($DLOCK_PG_USER): PostgreSQL
 * refuses to run as root. */
int pg_start(pg_proc *p);
/* SIGINT (fast shutdown), bounded wait, SIGKILL; removes the temp dir. */
int pg_stop(pg_proc *p);
/* Stop the server but keep its dir (pg_stop does both). */
int pg_stop_server_only(pg_proc *p);
/* Create / drop (WITH FORCE) database name; url gets its libpq URL. */
int pg_create_db(const pg_proc *p, const char *name, char *url, size_t urllen);
int pg_drop_db(const pg_proc *p, const char *name);
/* Run sql on url (bounded); out (may be NULL) gets the first cell of the
 * first row as text, "" when none. */
int pg_sql(const char *url, const char *sql, char *out, size_t outlen);
/* pg_sql, and *rows (may be NULL) gets the number of rows returned (0 for a
 * statement that returns none). */
int pg_query(const char *url, const char *sql, char *out, size_t outlen, int *rows);

typedef struct server_proc {
    pid_t pid;          /* 0 when not running */
    int port;           /* the real port read from "listening on http://HOST:PORT" */
    char url[96];       /* "http://127.0.0.1:<port>" */
} server_proc;

/* Start coupon-server ($COUPON_SERVER_BIN) with --listen 127.0.0.1:0 and the
 * NULL-terminated extra arguments; waits (bounded, 10 s) for its
 * "listening on" line on stdout. stderr is inherited. */
int server_start(server_proc *s, const char *const *extra_args);
/* Send sig (SIGTERM for a graceful stop), wait bounded (10 s, then SIGKILL);
 * *exit_status (may be NULL) gets the exit code, or 128+signal. */
int server_stop(server_proc *s, int sig, int *exit_status);
/* SIGSTOP / SIGCONT the server and wait until it is stopped / running again:
 * a GC pause or a swap storm of the whole process, for real. */
int server_pause(server_proc *s);
int server_resume(server_proc *s);

typedef struct http_reply {
    long status;        /* HTTP status, 0 on transport error */
    char *body;         /* NUL-terminated, malloc'd; free with http_reply_free */
    size_t body_len;
    char retry_after[32]; /* Retry-After header value, or "" */
    char content_type[96];
    char nosniff[32];       /* X-Content-Type-Options, or "" */
    char cache_control[64]; /* Cache-Control, or "" */
    char csp[256];          /* Content-Security-Policy, or "" */
} http_reply;

/* One HTTP request with libcurl (timeout 10 s). body may be NULL; headers is
 * a NULL-terminated list of "Name: value" lines or NULL. */
int http_request(const char *method, const char *url, const char *body,
                 const char *const *headers, http_reply *out);
void http_reply_free(http_reply *r);

#endif /* TESTS_PROCS_H */
