/* ops.c - what an operator sees:
 *   - the stderr log (start line with the effective options and no secret,
 *     node down / up, quorum lost / back, stop);
 *   - its rate limit with the count of what it held back, --log-level;
 *   - the access log;
 *   - /healthz "degraded" and its write probe;
 *   - the start-up refusals (read-only DB file, busy port: exit 2);
 *   - /metrics as promtool reads it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "ops.db"};

/* A server this suite spawned itself: stdout on a pipe (its start line),
 * stderr into a file the test reads. */
typedef struct spawned {
    pid_t pid;
    int out;              /* read end of its stdout */
    char url[96];
    char err_path[400];   /* its stderr */
} spawned;

static spawned g_sp;

static void setup(void)
{
    memset(&g_sp, 0, sizeof g_sp);
    g_sp.out = -1;
    app_suite_init();
    const char *vars[] = {"COUPON_LOG_LEVEL", "COUPON_ACCESS_LOG", "COUPON_LISTEN", "COUPON_DB", "COUPON_REDIS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

/* SIGTERM, bounded wait, SIGKILL; the exit status or 128 + signal. */
static int stop_spawned(spawned *s, int sig)
{
    int st = 0;
    if (s->pid <= 0)
        return -1;
    kill(s->pid, sig);
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(s->pid, &st, WNOHANG);
        if (r == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10 * 1000);
    }
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
    return 128 + SIGKILL;
}

static void teardown(void)
{
    stop_spawned(&g_sp, SIGKILL);
    if (g_sp.out >= 0)
        close(g_sp.out);
    app_suite_fini();
}

TestSuite(app_ops, .init = setup, .fini = teardown, .timeout = 60);

static const char *server_bin(void)
{
    const char *bin = getenv("COUPON_SERVER_BIN");
    cr_assert(bin && *bin, "COUPON_SERVER_BIN is not set");
    return bin;
}

/* Starts coupon-server with the NULL-terminated options after --listen
 * 127.0.0.1:0, stderr into <dir>/<name>.err; waits for its start line. */
static void spawn(spawned *s, const char *name, const char *const *opts)
{
    const char *argv[40];
    size_t n = 0;
    argv[n++] = server_bin();
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    for (size_t i = 0; opts[i] != NULL && n < 39; i++)
        argv[n++] = opts[i];
    argv[n] = NULL;
    snprintf(s->err_path, sizeof s->err_path, "%s/%s.err", g_app.dir, name);
    app_spawn_server(argv, s->err_path, &s->pid, &s->out, s->url, sizeof s->url);
}

/* Lines of the log that contain needle. */
static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Waits (bounded) until the log holds a line with needle; returns the log. */
static char *wait_log(const spawned *s, const char *needle, int timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    for (;;) {
        char *text = app_slurp(s->err_path);
        if (strstr(text, needle) != NULL)
            return text;
        if (test_now_ms() > deadline)
            cr_assert_fail("no log line with '%s' within %d ms; log:\n%s", needle, timeout_ms, text);
        free(text);
        test_sleep_ms(50);
    }
}

/* Every line: "<UTC time> <level> <event> <message>". */
static void check_line_shapes(const char *text)
{
    regex_t re;
    cr_assert_eq(regcomp(&re,
                         "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
                         "(error|warn|info|debug) [a-z-]+ [^ ].*$",
                         REG_EXTENDED | REG_NEWLINE),
                 0);
    char *copy = strdup(text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
        cr_assert_eq(regexec(&re, line, 0, NULL, 0), 0, "log line of the wrong shape: '%s'", line);
    free(copy);
    regfree(&re);
}

static void get(const spawned *s, const char *path, http_reply *r)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    cr_assert_eq(http_request("GET", url, NULL, NULL, r), 0);
}

static void post(const spawned *s, const char *path, http_reply *r)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    cr_assert_eq(http_request("POST", url, NULL, NULL, r), 0);
}

/* Whether the /healthz reply r has data.status state. */
static int health_state_is(const http_reply *r, const char *state)
{
    json_error_t err;
    json_t *root = r->body != NULL ? json_loads(r->body, 0, &err) : NULL;
    json_t *st = json_object_get(json_object_get(root, "data"), "status");
    int same = json_is_string(st) && strcmp(json_string_value(st), state) == 0;
    json_decref(root);
    return same;
}

/* GET /healthz until it answers status with data.status state (NULL: any):
 * it answers from the health prober's last round (every 500 ms), so a
 * change shows within about that; polled for at most 10 s. */
static void await_health(const spawned *s, long status, const char *state, http_reply *r)
{
    int64_t until = test_now_ms() + 10000;
    for (;;) {
        get(s, "/healthz", r);
        if ((r->status == status && (state == NULL || health_state_is(r, state))) || test_now_ms() >= until)
            return;
        http_reply_free(r);
        test_sleep_ms(50);
    }
}

/* /healthz: asserts HTTP status and data.status; returns data.nodes_down[0] or "". */
static void expect_health(const spawned *s, long status, const char *state, char *down0, size_t len)
{
    http_reply r;
    await_health(s, status, state, &r);
    json_t *root = app_envelope(&r, status);
    json_t *data = json_object_get(root, "data");
    cr_assert_str_eq(app_jstr(data, "status"), state, "%s", r.body);
    json_t *down = json_object_get(data, "nodes_down");
    cr_assert(json_is_array(down), "%s", r.body);
    if (down0 != NULL)
        snprintf(down0, len, "%s", json_array_size(down) ? json_string_value(json_array_get(down, 0)) : "");
    json_decref(root);
    http_reply_free(&r);
}

#define SECRET "ops-secret-token-4242b17c9e05d3a8"

Test(app_ops, log_tells_node_and_quorum_changes_and_hides_secrets)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 3, 0, 0, NULL);
    char redis[256], acc[400];
    redis_addrs_csv(g_app.redis, 3, redis, sizeof redis);
    snprintf(acc, sizeof acc, "%s/access.log", g_app.dir);
    const char *opts[] = {"--db", g_app.db, "--redis", redis, "--admin-token", SECRET, "--access-log", acc, NULL};
    spawn(&g_sp, "nodes", opts);

    char *log = wait_log(&g_sp, " info start ", 5000);
    cr_assert(strstr(log, "admin-token=set") != NULL, "start line without the options:\n%s", log);
    cr_assert(strstr(log, "redis=") != NULL && strstr(log, "log-level=info") != NULL, "%s", log);
    free(log);
    expect_health(&g_sp, 200, "ok", NULL, 0);

    /* One node down of three: still a quorum, but none to spare. */
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    char needle[160], down0[64];
    snprintf(needle, sizeof needle, " warn node-down redis node %s stopped", g_app.redis[0].addr);
    free(wait_log(&g_sp, needle, 5000));
    expect_health(&g_sp, 200, "degraded", down0, sizeof down0);
    cr_assert_str_eq(down0, g_app.redis[0].addr);

    cr_assert_eq(redis_kill(&g_app.redis[1]), 0);
    free(wait_log(&g_sp, " error quorum-lost ", 5000));
    expect_health(&g_sp, 503, "down", NULL, 0);

    cr_assert_eq(redis_restart(&g_app.redis[0]), 0);
    cr_assert_eq(redis_restart(&g_app.redis[1]), 0);
    free(wait_log(&g_sp, " info quorum-back ", 5000));
    /* Both came back: named in one line, or in two (two probes). */
    log = wait_log(&g_sp, " info node-up ", 5000);
    free(log);
    int64_t until = test_now_ms() + 5000;
    for (;;) {
        log = app_slurp(g_sp.err_path);
        const char *up = strstr(log, " info node-up ");
        int both = up != NULL && strstr(up, g_app.redis[0].addr) != NULL && strstr(up, g_app.redis[1].addr) != NULL;
        free(log);
        if (both)
            break;
        cr_assert_lt(test_now_ms(), until, "node-up lines do not name both nodes");
        test_sleep_ms(50);
    }

    http_reply r;
    post(&g_sp, "/api/v1/coupon/add?coupon_id=999&user_id=u1", &r);
    cr_assert_eq(r.status, 404);
    http_reply_free(&r);

    cr_assert_eq(stop_spawned(&g_sp, SIGTERM), 0);
    log = app_slurp(g_sp.err_path);
    cr_assert(strstr(log, " info stop SIGTERM: stopping") != NULL, "%s", log);
    cr_assert(strstr(log, " info stopped stopped") != NULL, "%s", log);
    cr_assert_eq(count_lines(log, " info start "), 1);
    cr_assert_eq(count_lines(log, " error quorum-lost "), 1, "%s", log);
    cr_assert_eq(count_lines(log, " info quorum-back "), 1, "%s", log);
    cr_assert_null(strstr(log, SECRET), "the admin token is in the log:\n%s", log);
    check_line_shapes(log);
    free(log);

    /* The access log: one line per request, "time method path status code seconds". */
    char *al = app_slurp(acc);
    cr_assert_null(strstr(al, SECRET));
    regex_t re;
    cr_assert_eq(regcomp(&re,
                         "^[0-9-]{10}T[0-9:.]{12}Z POST /api/v1/coupon/add 404 1002 [0-9]+\\.[0-9]{6}$",
                         REG_EXTENDED | REG_NEWLINE),
                 0);
    cr_assert_eq(regexec(&re, al, 0, NULL, 0), 0, "no claim line in the access log:\n%s", al);
    regfree(&re);
    cr_assert_geq(count_lines(al, " GET /healthz 200 0 "), 2, "%s", al);
    cr_assert_eq(count_lines(al, " GET /healthz 503 1006 "), 1, "%s", al);
    free(al);
}

Test(app_ops, rate_limit_counts_what_it_held_back)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 0, NULL);
    const char *opts[] = {"--db", g_app.db, "--redis", g_app.redis[0].addr, "--admin-token", APP_TOKEN, NULL};
    spawn(&g_sp, "flood", opts);
    free(wait_log(&g_sp, " info start ", 5000));
    server_proc sp = {.pid = g_sp.pid};
    snprintf(sp.url, sizeof sp.url, "%.90s", g_sp.url);
    long long id = app_create_coupon(&sp, "flood", 100, 0);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);

    /* 40 claims without Redis, each one lock-error event. */
    enum { FLOOD = 40 };
    char path[128];
    snprintf(path, sizeof path, "/api/v1/coupon/add?coupon_id=%lld&user_id=u", id);
    int64_t t0 = test_now_ms();
    for (int i = 0; i < FLOOD; i++) {
        http_reply r;
        post(&g_sp, path, &r);
        cr_assert_eq(r.status, 503);
        http_reply_free(&r);
    }
    int64_t took_s = (test_now_ms() - t0) / 1000 + 1;
    /* The next second's line says how many were held back. */
    test_sleep_ms(1100);
    http_reply r;
    post(&g_sp, path, &r);
    http_reply_free(&r);
    char *log = wait_log(&g_sp, "similar suppressed]", 3000);
    int lines = count_lines(log, " warn lock-error ");
    cr_assert_leq(lines, took_s + 2, "%d lock-error lines in ~%lld s:\n%s", lines, (long long)took_s, log);
    /* Every event is either a line or counted in a later line: exactly FLOOD + 1. */
    long long held = 0;
    for (const char *p = log; (p = strstr(p, " [")) != NULL; p += 2) {
        long long k = 0;
        if (sscanf(p, " [%lld similar suppressed]", &k) == 1)
            held += k;
    }
    cr_assert_eq(lines + held, FLOOD + 1, "%d lines + %lld held back != %d events:\n%s", lines, held, FLOOD + 1,
                 log);
    check_line_shapes(log);
    free(log);
}

Test(app_ops, log_level_filters)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 0, NULL);
    setenv("COUPON_LOG_LEVEL", "error", 1);
    const char *opts[] = {"--db", g_app.db, "--redis", g_app.redis[0].addr, NULL};
    spawn(&g_sp, "quiet", opts);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    free(wait_log(&g_sp, " error quorum-lost ", 5000));
    cr_assert_eq(stop_spawned(&g_sp, SIGTERM), 0);
    char *log = app_slurp(g_sp.err_path);
    /* warn (node-down) and info (start, stop) are below "error". */
    cr_assert_null(strstr(log, " info "), "%s", log);
    cr_assert_null(strstr(log, " warn "), "%s", log);
    free(log);
    unsetenv("COUPON_LOG_LEVEL");

    const char *bad[] = {server_bin(), "--log-level", "loud", NULL};
    char *out = NULL;
    cr_assert_eq(run_command(bad, 10000, &out), 2, "%s", out ? out : "");
    cr_assert(strstr(out, "--log-level") != NULL, "%s", out);
    free(out);
}

Test(app_ops, healthz_503_while_writes_fail)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 0, NULL);
    const char *opts[] = {"--db", g_app.db, "--redis", g_app.redis[0].addr, "--db-busy-ms", "100", NULL};
    spawn(&g_sp, "busy", opts);
    expect_health(&g_sp, 200, "ok", NULL, 0);

    /* Another writer holds the write lock past the busy timeout. */
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(g_app.db, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    http_reply r;
    await_health(&g_sp, 503, NULL, &r);
    json_t *root = app_expect(&r, 503, 1006);
    json_t *data = json_object_get(root, "data");
    cr_assert_str_eq(app_jstr(data, "db"), "down", "%s", r.body);
    cr_assert_str_eq(app_jstr(data, "lock"), "ok", "%s", r.body);
    cr_assert(strstr(app_jstr(data, "db_error"), "locked") != NULL, "%s", r.body);
    json_decref(root);
    http_reply_free(&r);
    cr_assert_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_health(&g_sp, 200, "ok", NULL, 0);
    char *log = app_slurp(g_sp.err_path);
    cr_assert(strstr(log, " error db-error health: the store refuses writes") != NULL, "%s", log);
    free(log);
}

Test(app_ops, read_only_db_file_exits_2)
{
    APP_SETUP_OK();
    char dir[300], db[400];
    snprintf(dir, sizeof dir, "%s/ro", g_app.dir);
    snprintf(db, sizeof db, "%s/ro.db", dir);
    cr_assert_eq(mkdir(dir, 01777), 0);
    cr_assert_eq(chmod(dir, 01777), 0);
    /* A store with its schema, then made read-only for whoever runs the server. */
    const char *mk[] = {server_bin(), "--db", db, "--strategy", "atomic-sql", "--listen", "127.0.0.1:0", NULL};
    spawned s0 = {0};
    (void)mk;
    const char *mkopts[] = {"--db", db, "--strategy", "atomic-sql", NULL};
    spawn(&s0, "mk", mkopts);
    cr_assert_eq(stop_spawned(&s0, SIGTERM), 0);
    close(s0.out);
    cr_assert_eq(chmod(db, 0444), 0);
    cr_assert_eq(chmod(g_app.dir, 0755), 0);

    /* root writes whatever the mode says: the server then runs as nobody. */
    const char *as_root[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", server_bin(),
                             "--db", db, "--strategy", "atomic-sql", "--listen", "127.0.0.1:0", NULL};
    const char *as_user[] = {server_bin(), "--db", db, "--strategy", "atomic-sql", "--listen", "127.0.0.1:0", NULL};
    if (geteuid() == 0 && access(as_root[0], X_OK) != 0)
        cr_skip_test("running as root without /usr/bin/setpriv: cannot make the file read-only for the server");
    char *out = NULL;
    int rc = run_command(geteuid() == 0 ? as_root : as_user, 10000, &out);
    cr_assert_eq(rc, 2, "exit %d on a read-only DB file: %s", rc, out ? out : "");
    size_t len = strlen(out);
    cr_assert(len > 1 && out[len - 1] == '\n' && memchr(out, '\n', len - 1) == NULL, "not one line: %s", out);
    cr_assert(strstr(out, "read-only") != NULL && strstr(out, db) != NULL, "%s", out);
    free(out);
}

Test(app_ops, busy_port_exits_2_with_the_port)
{
    APP_SETUP_OK();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 1), 0);
    socklen_t al = sizeof a;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    int port = ntohs(a.sin_port);
    char listen_s[32], want[64];
    snprintf(listen_s, sizeof listen_s, "127.0.0.1:%d", port);
    snprintf(want, sizeof want, "127.0.0.1:%d: Address already in use", port);
    const char *argv[] = {server_bin(), "--listen", listen_s, "--db", g_app.db, "--redis", "127.0.0.1:1", NULL};
    char *out = NULL;
    int rc = run_command(argv, 10000, &out);
    close(fd);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, out ? out : "");
    cr_assert(strstr(out, want) != NULL, "no '%s' in: %s", want, out);
    size_t len = strlen(out);
    cr_assert(memchr(out, '\n', len - 1) == NULL, "not one line: %s", out);
    free(out);
}

Test(app_ops, promtool_accepts_metrics)
{
    APP_SETUP_OK();
    /* scripts/test unpacks promtool into the build dir and names it in
     * DLOCK_PROMTOOL, rather than install the prometheus package (whose
     * service would be enabled at boot). */
    const char *promtool = getenv("DLOCK_PROMTOOL");
    if (promtool == NULL || promtool[0] == '\0')
        promtool = "/usr/bin/promtool";
    if (access(promtool, X_OK) != 0)
        cr_skip_test("promtool not found at %s (scripts/test fetches it into the build dir and sets "
                     "DLOCK_PROMTOOL): /metrics not checked by promtool", promtool);
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "prom", 1, 1);
    app_claim_expect(&g_app.srv[0], "POST", id, "a", 200, 0, 0);
    app_claim_expect(&g_app.srv[0], "POST", id, "b", 409, 1003, 0);
    http_reply r;
    app_request(&g_app.srv[0], "GET", "/healthz", NULL, NULL, &r);
    http_reply_free(&r);
    app_request(&g_app.srv[0], "GET", "/metrics", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    char path[400];
    snprintf(path, sizeof path, "%s/metrics.txt", g_app.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(r.body, 1, r.body_len, f), r.body_len);
    cr_assert_eq(fclose(f), 0);
    cr_assert(strstr(r.body, "coupon_build_info{version=\"") != NULL, "%s", r.body);
    cr_assert(strstr(r.body, "\nprocess_start_time_seconds ") != NULL, "%s", r.body);
    cr_assert(strstr(r.body, "coupon_http_request_duration_seconds_count{route=\"/api/v1/coupon/add\"} 2\n") != NULL,
              "%s", r.body);
    cr_assert(strstr(r.body, "\ncoupon_lock_nodes_up 1\n") != NULL && strstr(r.body, "\ncoupon_lock_quorum 1\n"),
              "%s", r.body);
    http_reply_free(&r);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' check metrics < '%s'", promtool, path);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL;
    int rc = run_command(argv, 20000, &out);
    /* promtool exits 0 only without errors; its lint findings are printed too. */
    cr_assert_eq(rc, 0, "promtool check metrics: exit %d:\n%s", rc, out ? out : "");
    cr_assert(out == NULL || out[0] == '\0', "promtool findings:\n%s", out);
    free(out);
}
