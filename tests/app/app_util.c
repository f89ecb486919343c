/* app_util.c - shared helpers of the coupon-server end-to-end suites. */
#include "app_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

/* Temp dirs not yet removed: an assertion in a suite's .init ends the
 * worker without running .fini, so an atexit handler removes what is left. */
#define APP_MAX_DIRS 8
static char g_dirs[APP_MAX_DIRS][256];
static pid_t g_dirs_owner;

static void remove_left_dirs(void)
{
    /* Only the worker that made them: a forked child inherits the table. */
    if (getpid() != g_dirs_owner)
        return;
    for (size_t i = 0; i < APP_MAX_DIRS; i++)
        if (g_dirs[i][0])
            test_rmtree(g_dirs[i]);
}

char app_setup_error[512];
char app_setup_skip[256];

void app_setup_fail(const char *fmt, ...)
{
    va_list ap;
    if (app_setup_error[0])
        return; /* the first failure is the cause; later ones follow from it */
    va_start(ap, fmt);
    vsnprintf(app_setup_error, sizeof app_setup_error, fmt, ap);
    va_end(ap);
}

/* Remembers dir for remove_left_dirs (this process's table). */
static void remember_dir(const char *dir)
{
    if (g_dirs_owner != getpid()) {
        memset(g_dirs, 0, sizeof g_dirs);
        g_dirs_owner = getpid();
        if (atexit(remove_left_dirs) != 0)
            g_dirs_owner = 0;
    }
    for (size_t i = 0; i < APP_MAX_DIRS; i++) {
        if (!g_dirs[i][0] && strlen(dir) < sizeof g_dirs[i]) {
            snprintf(g_dirs[i], sizeof g_dirs[i], "%s", dir);
            break;
        }
    }
}

static void app_rmtree(const char *dir)
{
    if (!dir || !*dir)
        return;
    test_rmtree(dir);
    for (size_t i = 0; i < APP_MAX_DIRS; i++)
        if (strcmp(g_dirs[i], dir) == 0)
            g_dirs[i][0] = '\0';
}

/* e->db: the SQLite file db_name in e->dir, or with pg a fresh database on
 * the binary's PostgreSQL server. 0, or -1 with app_setup_error or (no
 * PostgreSQL binaries) app_setup_skip set. */
static int store_init(app_env *e, const char *db_name, int pg)
{
    char why[256];
    int n;

    if (!pg) {
        n = snprintf(e->db, sizeof e->db, "%s/%s", e->dir, db_name);
        if (n <= 0 || (size_t)n >= sizeof e->db) {
            app_setup_fail("db path too long");
            return -1;
        }
        return 0;
    }
    n = app_store_pg_create(e->pg_name, sizeof e->pg_name, e->db, sizeof e->db, why, sizeof why);
    if (n == 1)
        snprintf(app_setup_skip, sizeof app_setup_skip, "%s", why);
    else if (n != 0)
        app_setup_fail("%s", why);
    return n == 0 ? 0 : -1;
}

static int env_init(app_env *e, const char *db_name, unsigned flags, int pg)
{
    memset(e, 0, sizeof *e);
    if (flags & APP_ENV_CURL) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            app_setup_fail("curl_global_init failed");
            return -1;
        }
        e->curl = 1;
    }
    if (test_mkdtemp(e->dir, sizeof e->dir, "coupon-apptest.") != 0) {
        app_setup_fail("no temp dir (see stderr)");
        return -1;
    }
    remember_dir(e->dir);
    return store_init(e, db_name, pg);
}

#define APP_MAX_ARGS 48

/* Appends the NULL-terminated options of ap to args[n..]; the new count, or
 * -1 with app_setup_error set. args keeps room for the final NULL. */
static int append_args(const char **args, int n, va_list ap)
{
    for (const char *a = va_arg(ap, const char *); a; a = va_arg(ap, const char *)) {
        if (n == APP_MAX_ARGS) {
            app_setup_fail("too many server options");
            return -1;
        }
        args[n++] = a;
    }
    args[n] = NULL;
    return n;
}

static int start_server(server_proc *s, const char *const *args)
{
    memset(s, 0, sizeof *s);
    if (server_start(s, args) != 0) {
        app_setup_fail("coupon-server did not start (COUPON_SERVER_BIN=%s)",
                       getenv("COUPON_SERVER_BIN") ? getenv("COUPON_SERVER_BIN") : "(unset)");
        return -1;
    }
    return 0;
}

/* args = the options every server of e gets, then those of ap: the count,
 * or -1. csv holds the node list the args point to. */
static int env_args(const app_env *e, const char **args, char *csv, size_t csvlen, va_list ap)
{
    redis_addrs_csv(e->redis, e->nredis, csv, csvlen);
    args[0] = "--db";
    args[1] = e->db;
    args[2] = "--redis";
    args[3] = csv;
    args[4] = "--admin-token";
    args[5] = APP_TOKEN;
    return append_args(args, 6, ap);
}

static int env_vtry(app_env *e, size_t nredis, int persistent, size_t nservers, va_list ap)
{
    const char *args[APP_MAX_ARGS + 1];
    char csv[256];
    if (nredis > APP_MAX_REDIS || nservers > APP_MAX_SERVERS) {
        app_setup_fail("app_env: %zu nodes / %zu servers is more than it holds", nredis, nservers);
        return -1;
    }
    e->nredis = nredis;
    for (size_t i = 0; i < nredis; i++) {
        memset(&e->redis[i], 0, sizeof e->redis[i]);
        e->redis[i].persistent = persistent;
    }
    for (size_t i = 0; i < nredis; i++) {
        if (redis_start(&e->redis[i]) != 0) {
            app_setup_fail("redis-server %zu of %zu did not start", i + 1, nredis);
            return -1;
        }
    }
    if (env_args(e, args, csv, sizeof csv, ap) < 0)
        return -1;
    for (size_t i = 0; i < nservers; i++)
        if (start_server(&e->srv[i], args) != 0)
            return -1;
    return 0;
}

void app_env_up(app_env *e, size_t nredis, int persistent, size_t nservers, ...)
{
    va_list ap;
    va_start(ap, nservers);
    int rc = env_vtry(e, nredis, persistent, nservers, ap);
    va_end(ap);
    cr_assert_eq(rc, 0, "%s", app_setup_error);
}

void app_env_server_up(app_env *e, size_t i, ...)
{
    const char *args[APP_MAX_ARGS + 1];
    char csv[256];
    va_list ap;
    cr_assert_lt(i, APP_MAX_SERVERS, "server %zu: app_env holds %d", i, APP_MAX_SERVERS);
    va_start(ap, i);
    int n = env_args(e, args, csv, sizeof csv, ap);
    va_end(ap);
    cr_assert(n >= 0 && start_server(&e->srv[i], args) == 0, "%s", app_setup_error);
}

/* The exit status the memcheck run's wrapper gives a server with errors
 * (DLOCK_TEST_SERVER_WRAPPER="valgrind --error-exitcode=99 ..."). */
#define APP_MEMCHECK_EXIT 99

static void env_down(app_env *e)
{
    int memcheck_failed = 0;
    for (size_t i = 0; i < APP_MAX_SERVERS; i++) {
        int code = 0;
        if (e->srv[i].pid > 0 && server_stop(&e->srv[i], SIGTERM, &code) == 0 && code == APP_MEMCHECK_EXIT)
            memcheck_failed = 1;
    }
    /* A paused node must be resumed to take SIGTERM; redis_stop handles it. */
    redis_stop_n(e->redis, APP_MAX_REDIS);
    /* After the servers: their sessions are gone, the drop does not wait. */
    app_store_pg_drop(e->pg_name);
    e->pg_name[0] = '\0';
    app_rmtree(e->dir);
    if (e->curl)
        curl_global_cleanup();
    e->curl = 0;
    if (memcheck_failed) {
        /* A failed assertion in .fini does not fail the test in Criterion
         * 2.4; a crash of the test process does, and names the test. */
        fprintf(stderr, "a coupon-server exited %d: valgrind found errors (see above)\n", APP_MEMCHECK_EXIT);
        abort();
    }
}

app_env g_app;

/* env_vtry with no extra options. */
static int env_try(app_env *e, size_t nredis, int persistent, size_t nservers, ...)
{
    va_list ap;
    va_start(ap, nservers);
    int rc = env_vtry(e, nredis, persistent, nservers, ap);
    va_end(ap);
    return rc;
}

void app_suite_init(void)
{
    if (env_init(&g_app, app_plan.db_name, app_plan.flags, app_plan.pg) == 0)
        env_try(&g_app, app_plan.nredis, 0, app_plan.nservers, NULL);
}

void app_suite_fini(void)
{
    env_down(&g_app);
}

void app_server_up(server_proc *s, ...)
{
    const char *args[APP_MAX_ARGS + 1];
    va_list ap;
    va_start(ap, s);
    int n = append_args(args, 0, ap);
    va_end(ap);
    cr_assert(n >= 0 && start_server(s, args) == 0, "%s", app_setup_error);
}

void app_url(char *out, size_t len, const server_proc *s, const char *path_fmt, ...)
{
    char path[2048];
    va_list ap;
    va_start(ap, path_fmt);
    int n = vsnprintf(path, sizeof path, path_fmt, ap);
    va_end(ap);
    cr_assert(n >= 0 && (size_t)n < sizeof path, "path too long");
    n = snprintf(out, len, "%s%s", s->url, path);
    cr_assert(n >= 0 && (size_t)n < len, "url too long");
}

json_t *app_envelope(const http_reply *r, long status)
{
    json_error_t jerr;
    cr_assert_eq(r->status, status, "HTTP status %ld, expected %ld; body: %s", r->status, status,
                 r->body ? r->body : "(none)");
    cr_assert(strncmp(r->content_type, "application/json", 16) == 0,
              "Content-Type '%s', expected application/json", r->content_type);
    json_t *root = json_loadb(r->body ? r->body : "", r->body_len, 0, &jerr);
    cr_assert_not_null(root, "body is not JSON (%s): %s", jerr.text, r->body ? r->body : "");
    cr_assert(json_is_object(root), "body is not a JSON object: %s", r->body);
    json_t *code = json_object_get(root, "code");
    json_t *msg = json_object_get(root, "msg");
    json_t *data = json_object_get(root, "data");
    cr_assert(json_is_integer(code), "no integer code: %s", r->body);
    cr_assert(json_is_string(msg), "no string msg: %s", r->body);
    cr_assert(json_string_length(msg) > 0, "empty msg: %s", r->body);
    cr_assert(data && (json_is_object(data) || json_is_array(data) || json_is_null(data)),
              "data missing or of the wrong type: %s", r->body);
    return root;
}

json_t *app_expect(const http_reply *r, long status, long long want_code)
{
    json_t *root = app_envelope(r, status);
    long long code = (long long)json_integer_value(json_object_get(root, "code"));
    cr_assert_eq(code, want_code, "code %lld, expected %lld; body: %s", code, want_code, r->body);
    return root;
}

long long app_jint(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_integer(v), "member '%s' missing or not an integer", key);
    return (long long)json_integer_value(v);
}

const char *app_jstr(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_string(v), "member '%s' missing or not a string", key);
    return json_string_value(v);
}

long long app_create_coupon(const server_proc *s, const char *name, long long stock,
                            long long per_user_limit)
{
    char url[256];
    const char *headers[] = {"Authorization: Bearer " APP_TOKEN, "Content-Type: application/json",
                             NULL};
    http_reply r = {0};
    json_t *req = json_pack("{s:s, s:I, s:I}", "name", name, "stock", (json_int_t)stock,
                            "per_user_limit", (json_int_t)per_user_limit);
    cr_assert_not_null(req, "json_pack");
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    cr_assert_not_null(body, "json_dumps");
    app_url(url, sizeof url, s, "/api/v1/admin/coupon");
    int rc = http_request("POST", url, body, headers, &r);
    free(body);
    cr_assert_eq(rc, 0, "admin create: transport error");
    json_t *root = app_expect(&r, 201, 0);
    json_t *data = json_object_get(root, "data");
    long long id = app_jint(data, "coupon_id");
    cr_assert_gt(id, 0, "coupon_id %lld", id);
    json_decref(root);
    http_reply_free(&r);
    return id;
}

void app_claim(const server_proc *s, const char *method, long long coupon_id, const char *user,
               http_reply *out)
{
    char url[512];
    app_url(url, sizeof url, s, "/api/v1/coupon/add?coupon_id=%lld&user_id=%s", coupon_id, user);
    memset(out, 0, sizeof *out);
    cr_assert_eq(http_request(method, url, NULL, NULL, out), 0, "%s %s: transport error", method,
                 url);
    cr_assert_neq(out->status, 0, "%s %s: no HTTP status", method, url);
}

void app_claim_expect(const server_proc *s, const char *method, long long coupon_id,
                      const char *user, long status, long long code, unsigned flags)
{
    http_reply r;
    app_claim(s, method, coupon_id, user, &r);
    json_decref(app_expect(&r, status, code));
    if ((flags & APP_RETRY_AFTER) && status == 503)
        cr_assert(r.retry_after[0] != '\0', "503 without Retry-After");
    http_reply_free(&r);
}

void app_request(const server_proc *s, const char *method, const char *path, const char *body,
                 const char *const *headers, http_reply *out)
{
    char url[1024];
    app_url(url, sizeof url, s, "%s", path);
    memset(out, 0, sizeof *out);
    cr_assert_eq(http_request(method, url, body, headers, out), 0, "%s %s: transport error",
                 method, path);
}

static sqlite3 *db_open_rw(const char *db_path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        const char *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", why);
        sqlite3_close(db);
        cr_assert_fail("sqlite3_open %s: %s", db_path, msg);
    }
    /* The servers write the same file concurrently: wait for their
     * transactions instead of failing with SQLITE_BUSY. */
    sqlite3_busy_timeout(db, 10000);
    return db;
}

/* db_run on a PostgreSQL URL, through libpq behind the servers' backs. */
static void pg_run(const char *url, long long *v, const char *sql)
{
    char out[64], *end;
    int rows = 0;

    cr_assert_eq(pg_query(url, sql, out, sizeof out, &rows), 0, "postgresql '%s' failed (see stderr)", sql);
    if (!v)
        return;
    cr_assert_eq(rows, 1, "postgresql '%s': %d rows, expected 1", sql, rows);
    *v = strtoll(out, &end, 10);
    cr_assert(end != out && *end == '\0', "postgresql '%s': '%s' is not an integer", sql, out);
}

/* Runs the formatted SQL on the store: with v, as a query that must return
 * exactly one row, whose first column goes to *v; without, as statements. */
static void db_run(const char *db_path, long long *v, const char *sql_fmt, va_list ap)
{
    char sql[8192];
    int n = vsnprintf(sql, sizeof sql, sql_fmt, ap);
    cr_assert(n >= 0 && (size_t)n < sizeof sql, "sql too long");

    if (app_store_is_pg(db_path)) {
        pg_run(db_path, v, sql);
        return;
    }
    sqlite3 *db = db_open_rw(db_path);
    char err[512] = "";
    int rc, rows = 0;
    if (v) {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK) {
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                *v = (long long)sqlite3_column_int64(st, 0);
                rows++;
            }
        }
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        else
            snprintf(err, sizeof err, "%s", sqlite3_errmsg(db));
        sqlite3_finalize(st);
    } else {
        char *emsg = NULL;
        rc = sqlite3_exec(db, sql, NULL, NULL, &emsg);
        if (rc != SQLITE_OK)
            snprintf(err, sizeof err, "%s", emsg ? emsg : sqlite3_errstr(rc));
        sqlite3_free(emsg);
    }
    sqlite3_close(db);
    cr_assert_eq(rc, SQLITE_OK, "sqlite '%s': %s", sql, err);
    if (v)
        cr_assert_eq(rows, 1, "sqlite '%s': %d rows, expected 1", sql, rows);
}

long long app_db_int(const char *db_path, const char *sql_fmt, ...)
{
    long long v = 0;
    va_list ap;
    va_start(ap, sql_fmt);
    db_run(db_path, &v, sql_fmt, ap);
    va_end(ap);
    return v;
}

void app_db_exec(const char *db_path, const char *sql_fmt, ...)
{
    va_list ap;
    va_start(ap, sql_fmt);
    db_run(db_path, NULL, sql_fmt, ap);
    va_end(ap);
}

void app_db_state(const char *db_path, long long coupon_id, app_coupon_state *out)
{
    memset(out, 0, sizeof *out);
    out->total = app_db_int(db_path, "SELECT total FROM coupon WHERE id=%lld", coupon_id);
    out->stock = app_db_int(db_path, "SELECT stock FROM coupon WHERE id=%lld", coupon_id);
    out->per_user_limit =
        app_db_int(db_path, "SELECT per_user_limit FROM coupon WHERE id=%lld", coupon_id);
    out->records =
        app_db_int(db_path, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id=%lld", coupon_id);
    out->users_over = app_db_int(db_path,
                                 "SELECT COUNT(*) FROM (SELECT user_id FROM coupon_record r "
                                 "JOIN coupon c ON c.id=r.coupon_id WHERE r.coupon_id=%lld "
                                 "AND c.per_user_limit>0 GROUP BY r.user_id "
                                 "HAVING COUNT(*)>MAX(c.per_user_limit)) AS over_limit",
                                 coupon_id);
}

void app_expect_db(const char *db_path, long long coupon_id, long long stock, long long records,
                   app_coupon_state *out)
{
    app_db_state(db_path, coupon_id, out);
    cr_assert_eq(out->stock, stock, "stock %lld, expected %lld", out->stock, stock);
    cr_assert_eq(out->records, records, "records %lld, expected %lld", out->records, records);
}

void app_redis(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv)
{
    cr_assert_eq(redis_cmd(r, out, outlen, argc, argv), 0, "redis %s on %s failed", argv[0],
                 r->addr);
}

/* calls= of one command in the node's INFO commandstats (0 when absent:
 * never called since the start). */
static long long redis_calls(const redis_proc *r, const char *cmd)
{
    char out[16384], key[64];
    const char *argv[] = {"INFO", "commandstats"};

    app_redis(r, out, sizeof out, 2, argv);
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(out, key);
    return p != NULL ? strtoll(p + strlen(key), NULL, 10) : 0;
}

long long app_lock_scripts(const redis_proc *r)
{
    return redis_calls(r, "evalsha") + redis_calls(r, "eval");
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
    app_body *b = user;
    size_t n = size * nmemb;
    size_t room = sizeof b->data - 1 - b->len;
    memcpy(b->data + b->len, ptr, n < room ? n : room);
    b->len += n < room ? n : room;
    b->data[b->len] = '\0';
    return n;
}

CURLcode app_curl_post(CURL *h, const char *url, app_body *b, long connect_ms, long *status)
{
    b->len = 0;
    b->data[0] = '\0';
    *status = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    /* No SIGALRM for timeouts: the workers are threads. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return rc;
}

long long app_body_code(const app_body *b, json_t **root)
{
    json_error_t jerr;
    *root = json_loads(b->data, 0, &jerr);
    json_t *code = *root ? json_object_get(*root, "code") : NULL;
    return json_is_integer(code) ? (long long)json_integer_value(code) : -1;
}

void app_spawn_server(const char *const *argv, const char *err_path, pid_t *pid, int *out, char *url,
                      size_t urllen)
{
    int fds[2];
    int errfd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(errfd, 0, "%s: %s", err_path, strerror(errno));
    cr_assert_eq(pipe(fds), 0);
    pid_t parent = getpid();
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0) {
        /* A test that dies mid-way must not leave its server running. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        dup2(fds[1], STDOUT_FILENO);
        dup2(errfd, STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(errfd);
    close(fds[1]);
    *pid = child;
    *out = fds[0];
    char line[256];
    size_t k = 0;
    int64_t deadline = test_now_ms() + 10000;
    while (k + 1 < sizeof line) {
        struct pollfd p = {.fd = *out, .events = POLLIN};
        int64_t left = deadline - test_now_ms();
        cr_assert_gt(left, 0, "no start line within 10 s");
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char c;
        if (read(*out, &c, 1) != 1)
            cr_assert_fail("server stdout closed before its start line");
        if (c == '\n')
            break;
        line[k++] = c;
    }
    line[k] = '\0';
    cr_assert_eq(strncmp(line, "listening on ", 13), 0, "start line '%s'", line);
    snprintf(url, urllen, "%s", line + 13);
}

char *app_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    char *buf = calloc(1, 1 << 20);
    cr_assert_not_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

long long app_metric(const server_proc *s, const char *name)
{
    http_reply r;
    app_request(s, "GET", "/metrics", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    long long v = -1;
    size_t n = strlen(name);
    for (const char *p = r.body; p != NULL && *p != '\0';) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ') {
            v = strtoll(p + n + 1, NULL, 10);
            break;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    http_reply_free(&r);
    return v;
}
