/* app_util.h - shared helpers of the coupon-server end-to-end suites: temp
 * dirs, starting servers with options, the JSON envelope checks, admin
 * coupon creation, claims, and direct reads/writes of the SQLite file. */
#ifndef TESTS_APP_UTIL_H
#define TESTS_APP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "procs.h"

/* The admin token every suite starts its servers with. */
#define APP_TOKEN "app-suite-token-7f3a"
/* Key naming of the server's lock on one coupon (ARCHITECTURE: "lock:coupon:<id>"). */
#define APP_LOCK_KEY_FMT "lock:coupon:%lld"

/* Suite .init functions must not assert (Criterion then kills the worker
 * without running .fini, leaking processes and dirs): they use the *_try
 * helpers, which record the first failure here, and every test starts with
 * APP_SETUP_OK(). */
extern char app_setup_error[512];
void app_setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define APP_SETUP_OK() cr_assert(app_setup_error[0] == '\0', "setup failed: %s", app_setup_error)

/* mkdtemp under $TMPDIR or /tmp: 0, or -1 with app_setup_error set. */
int app_tmpdir_try(char *dir, size_t len);
/* Same, asserting (for test bodies). */
void app_tmpdir(char *dir, size_t len);
/* Removes dir and everything below it (depth first, no symlink following). NULL / "" ok. */
void app_rmtree(const char *dir);
/* .init: app_tmpdir_try into dir, then db = "<dir>/<db_name>": 0, or -1
 * with app_setup_error set. */
int app_dir_try(char *dir, size_t dirlen, char *db, size_t dblen, const char *db_name);

/* Starts coupon-server with the NULL-terminated options (after the
 * --listen 127.0.0.1:0 the support adds): app_server_up asserts,
 * app_server_try returns 0 or -1 with app_setup_error set. */
void app_server_up(server_proc *s, ...);
int app_server_try(server_proc *s, ...);
/* Starts n Redis nodes (persistent: appendonly + fsync always). */
void app_redis_up(redis_proc *rs, size_t n, int persistent);
int app_redis_try(redis_proc *rs, size_t n, int persistent);
/* Stops a server if running with SIGTERM and returns its exit code (-1 if not running). */
int app_server_down(server_proc *s);
/* One Redis node (not persistent) and a server on db with APP_TOKEN and
 * default options: app_single_up asserts, app_single_try returns 0 or -1
 * with app_setup_error set. */
void app_single_up(redis_proc *r, server_proc *s, const char *db);
int app_single_try(redis_proc *r, server_proc *s, const char *db);
/* .fini: app_server_down(s), stop the n Redis nodes, remove dir. */
void app_down(server_proc *s, redis_proc *rs, size_t n, const char *dir);

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

/* One integer from a query on the SQLite file (opened read-write, busy
 * timeout 10 s); asserts the query returns exactly one row. */
long long app_db_int(const char *db_path, const char *sql_fmt, ...);
/* Runs statements on the SQLite file; asserts success. */
void app_db_exec(const char *db_path, const char *sql_fmt, ...);

typedef struct app_coupon_state {
    long long total;
    long long stock;
    long long records;        /* COUNT(coupon_record) of the coupon */
    long long users_over;     /* users holding more than per_user_limit (0 when unlimited) */
    long long per_user_limit;
} app_coupon_state;
/* Reads the coupon's row and its records straight from the file. */
void app_db_state(const char *db_path, long long coupon_id, app_coupon_state *out);

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

#endif /* TESTS_APP_UTIL_H */
