/* app_util.h - shared helpers of the coupon-server end-to-end suites: the
 * suite fixture (temp dir, store, Redis nodes, coupon-servers), the JSON
 * envelope checks, admin coupon creation, claims, and direct reads/writes
 * of the store (the SQLite file, or the test's PostgreSQL database). */
#ifndef TESTS_APP_UTIL_H
#define TESTS_APP_UTIL_H

#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "app_store.h"
#include "procs.h"

/* The admin token every suite starts its servers with. */
#define APP_TOKEN "app-suite-token-7f3a0c9e51d28b46"
/* Keys of the server's lock on one coupon: the resource "coupon:<id>" under
 * libdlock's namespaces (dlock.h, "Keys"): the lock and its fence counter. */
#define APP_LOCK_KEY_FMT "lock:coupon:%lld"
#define APP_FENCE_KEY_FMT "fence:coupon:%lld"

/* A suite's .init must not assert (Criterion then kills the worker without
 * running .fini, leaking processes and dirs): app_suite_init records the
 * first failure here (app_setup_fail), and every test starts with
 * APP_SETUP_OK(). */
extern char app_setup_error[512];
void app_setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Why .init could not set up and the tests must skip (no PostgreSQL server
 * binaries for a PostgreSQL build), or "". */
extern char app_setup_skip[256];
#define APP_SETUP_OK()                                                                   \
    do {                                                                                 \
        if (app_setup_skip[0] != '\0')                                                   \
            cr_skip_test("%s", app_setup_skip);                                          \
        cr_assert(app_setup_error[0] == '\0', "setup failed: %s", app_setup_error);      \
    } while (0)

/* The processes and files of a suite: up to APP_MAX_REDIS Redis nodes and
 * APP_MAX_SERVERS coupon-servers, the temp dir, and the store: the SQLite
 * file in the dir, or a PostgreSQL database of its own (app_store.h). */
#define APP_MAX_REDIS 3
#define APP_MAX_SERVERS 2
typedef struct app_env {
    redis_proc redis[APP_MAX_REDIS];
    size_t nredis;                    /* nodes started (app_env_up, or .init) */
    server_proc srv[APP_MAX_SERVERS];
    char dir[256];
    char db[320];                     /* the servers' --db: "<dir>/<db_name>", or the URL of pg_name */
    char pg_name[64];                 /* the test's PostgreSQL database, dropped by .fini; or "" */
    int curl;                         /* .init called curl_global_init */
} app_env;

/* app_suite_plan flag: curl_global_init first, for the suites whose threads
 * use curl handles of their own (it is not thread-safe: before any thread). */
#define APP_ENV_CURL 1u

/* The suites' fixture. Each suite defines app_plan, and its TestSuite takes
 * .init = app_suite_init, .fini = app_suite_fini. .init zeroes g_app, makes
 * the temp dir and g_app.db, and starts the plan's nodes and servers (the
 * servers with the options of app_env_server_up and no others), recording
 * a failure for APP_SETUP_OK(). .fini stops every server and node (resuming
 * paused ones), removes the temp dir, and undoes curl's init. */
typedef struct app_suite_plan {
    const char *db_name; /* the SQLite file in the temp dir (unused with pg) */
    int pg;              /* nonzero: a fresh PostgreSQL database instead (APP_PG builds) */
    unsigned flags;      /* APP_ENV_CURL */
    size_t nredis;       /* nodes .init starts (not persistent) */
    size_t nservers;     /* servers .init starts on them */
} app_suite_plan;
extern const app_suite_plan app_plan; /* defined by each suite */
extern app_env g_app;                 /* the suite's fixture */
void app_suite_init(void);
void app_suite_fini(void);

/* In a test: starts nredis nodes (persistent: appendonly + fsync always),
 * then servers srv[0..nservers), each with the options app_env_server_up
 * gives and the same NULL-terminated extra options; asserts. */
void app_env_up(app_env *e, size_t nredis, int persistent, size_t nservers, ...);
/* Starts srv[i] with --db e->db --redis <every node of e> --admin-token
 * APP_TOKEN and the NULL-terminated extra options; asserts. */
void app_env_server_up(app_env *e, size_t i, ...);

/* Starts coupon-server with exactly the NULL-terminated options (after the
 * --listen 127.0.0.1:0 the support adds), for servers app_env_server_up
 * does not describe (no admin token, one node of several); asserts. */
void app_server_up(server_proc *s, ...);

/* url = s->url + path (path starts with '/'). */
void app_url(char *out, size_t len, const server_proc *s, const char *path_fmt, ...);

/* Parses the body as the contract's envelope {code:int, msg:non-empty
 * string, data:object|array|null}, checks the HTTP status and the JSON
 * Content-Type; returns the root (caller json_decref's it). */
json_t *app_envelope(const http_reply *r, long status);
/* app_envelope plus code == want_code; returns the root. */
json_t *app_expect(const http_reply *r, long status, long long want_code);
/* The integer member key of obj (asserted present and an integer). */
long long app_jint(const json_t *obj, const char *key);
/* The string member key of obj (asserted present and a string); borrowed. */
const char *app_jstr(const json_t *obj, const char *key);

/* POST /api/v1/admin/coupon with APP_TOKEN; asserts 201 and returns the new id. */
long long app_create_coupon(const server_proc *s, const char *name, long long stock,
                            long long per_user_limit);
/* method ("POST"/"GET") /api/v1/coupon/add?coupon_id=<id>&user_id=<user>;
 * user must be URL-safe. Asserts the transport worked (status != 0). */
void app_claim(const server_proc *s, const char *method, long long coupon_id, const char *user,
               http_reply *out);
/* app_claim whose reply must be status / code (app_expect); with
 * APP_RETRY_AFTER a 503 must also carry a Retry-After header. */
#define APP_RETRY_AFTER 1u
void app_claim_expect(const server_proc *s, const char *method, long long coupon_id,
                      const char *user, long status, long long code, unsigned flags);
/* method url_path (from s->url) with the optional body and NULL-terminated
 * headers; asserts the transport worked. */
void app_request(const server_proc *s, const char *method, const char *path, const char *body,
                 const char *const *headers, http_reply *out);

/* One integer from a query on the store db_path names (a SQLite file,
 * opened read-write with a busy timeout of 10 s, or a PostgreSQL URL, with
 * a 30 s statement timeout); asserts the query returns exactly one row. The
 * SQL must mean the same on both (it does for plain SELECT/UPDATE). */
long long app_db_int(const char *db_path, const char *sql_fmt, ...);
/* Runs statements on the store db_path names; asserts success. */
void app_db_exec(const char *db_path, const char *sql_fmt, ...);

typedef struct app_coupon_state {
    long long total;
    long long stock;
    long long records;        /* COUNT(coupon_record) of the coupon */
    long long users_over;     /* users holding more than per_user_limit (0 when unlimited) */
    long long per_user_limit;
} app_coupon_state;
/* Reads the coupon's row and its records straight from the store. */
void app_db_state(const char *db_path, long long coupon_id, app_coupon_state *out);
/* app_db_state, then asserts the coupon's stock and its record count. */
void app_expect_db(const char *db_path, long long coupon_id, long long stock, long long records,
                   app_coupon_state *out);

/* A reply body read by app_curl_post (truncated to fit, always terminated). */
typedef struct app_body {
    char data[4096];
    size_t len;
} app_body;
/* POST url with an empty body on the caller's handle h (so its keep-alive
 * connection is reused), the reply into *b; 20 s timeout, connect_ms to
 * connect. Returns curl's result; *status gets the HTTP status (0 on a
 * transport error). Safe to call from worker threads. */
CURLcode app_curl_post(CURL *h, const char *url, app_body *b, long connect_ms, long *status);
/* The envelope's integer "code" of b (-1 when the body is not such JSON);
 * *root gets the parsed body (NULL if unparsable; caller json_decref's it). */
long long app_body_code(const app_body *b, json_t **root);

/* Runs one Redis command on a node; asserts it answered; out gets the text. */
void app_redis(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv);

/* The scripts (EVALSHA and EVAL calls, INFO commandstats) the node ran
 * since it started: every command that takes, extends or releases a lock
 * is one. */
long long app_lock_scripts(const redis_proc *r);

/* Starts a coupon-server by hand: argv[0] the binary, NULL-terminated;
 * stdout on a pipe (*out, the caller closes it), stderr into err_path (the
 * server dies with this process: PR_SET_PDEATHSIG). Waits at most 10 s for
 * its "listening on URL" line and copies URL into url. For suites that
 * need the raw process (its log, its exit status) rather than app_env's. */
void app_spawn_server(const char *const *argv, const char *err_path, pid_t *pid, int *out, char *url,
                      size_t urllen);

/* GET /metrics of s: the number after "name " (a metric without labels,
 * or with its labels written into name); -1 when the series is absent. */
long long app_metric(const server_proc *s, const char *name);

/* A whole file (at most 1 MiB), NUL-terminated; the caller frees it. */
char *app_slurp(const char *path);

#endif /* TESTS_APP_UTIL_H */
