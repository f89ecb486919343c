/* cli.c - coupon-server's command line and process contract: bad options
 * exit 2 with one line on stderr, the environment variables are read, the
 * start line names the real port, SIGTERM and SIGINT exit 0. */
#include <errno.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "coupon.db"};
/* A server this suite spawned itself (to read its stdout exactly). */
static pid_t g_child;
static int g_child_out = -1;

static void setup(void)
{
    g_child = 0;
    g_child_out = -1;
    app_suite_init();
    /* The suite decides every option itself: nothing from the caller's shell. */
    const char *vars[] = {"COUPON_LISTEN",      "COUPON_DB",     "COUPON_REDIS",
                          "COUPON_LOCK_TTL_MS", "COUPON_LOCK_WAIT_MS", "COUPON_STRATEGY",
                          "COUPON_THREADS",     "COUPON_ADMIN_TOKEN"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static int wait_child(pid_t pid, int sig)
{
    int st = 0;
    if (pid <= 0)
        return -1;
    kill(pid, sig);
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR)
            return -1;
        usleep(10 * 1000);
    }
    /* Not gone within 10 s: a hung shutdown must not outlive the test. */
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return 128 + SIGKILL;
}

static void teardown(void)
{
    if (g_child > 0)
        wait_child(g_child, SIGKILL);
    g_child = 0;
    if (g_child_out >= 0)
        close(g_child_out);
    g_child_out = -1;
    app_suite_fini();
}

TestSuite(app_cli, .init = setup, .fini = teardown, .timeout = 30);

static const char *server_bin(void)
{
    const char *bin = getenv("COUPON_SERVER_BIN");
    cr_assert(bin && *bin, "COUPON_SERVER_BIN is not set (is the coupon-server target built?)");
    return bin;
}

/* Starts the server with argv (argv[0] is set here) and returns its first
 * stdout line in line (without the newline); the pipe stays open (a closed
 * stdout would kill a server that logs later with SIGPIPE). */
static void spawn_line(const char **argv, char *line, size_t len)
{
    int fds[2];
    argv[0] = server_bin();
    cr_assert_eq(pipe(fds), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* A test killed by its timeout must not leave the server behind. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    g_child = pid;
    g_child_out = fds[0];

    size_t n = 0;
    int64_t deadline = test_now_ms() + 10000;
    while (n + 1 < len) {
        int64_t left = deadline - test_now_ms();
        cr_assert_gt(left, 0, "no start line within 10 s (got '%.*s')", (int)n, line);
        struct pollfd p = {.fd = g_child_out, .events = POLLIN};
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        cr_assert(pr >= 0, "poll: %s", strerror(errno));
        if (pr == 0)
            continue;
        char c;
        ssize_t r = read(g_child_out, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        cr_assert_eq(r, 1, "server stdout closed before a full start line (got '%.*s')", (int)n,
                     line);
        if (c == '\n')
            break;
        line[n++] = c;
    }
    line[n] = '\0';
}

/* Port from a start line of the contract's exact form, or fails. */
static int parse_start_line(const char *line)
{
    regex_t re;
    regmatch_t m[2];
    cr_assert_eq(regcomp(&re, "^listening on http://127\\.0\\.0\\.1:([0-9]{1,5})$", REG_EXTENDED),
                 0);
    int rc = regexec(&re, line, 2, m, 0);
    regfree(&re);
    cr_assert_eq(rc, 0, "start line '%s' is not 'listening on http://127.0.0.1:<port>'", line);
    int port = atoi(line + m[1].rm_so);
    cr_assert(port > 0 && port < 65536, "port %d", port);
    return port;
}

/* Runs the server with args and the base options it does not itself set;
 * asserts exit 2 and exactly one non-empty line of output. */
static void expect_usage_error(const char *const *args, size_t nargs, int with_base)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = server_bin();
    if (with_base) {
        const char *base[][2] = {{"--listen", "127.0.0.1:0"}, {"--db", g_app.db},
                                 {"--redis", "127.0.0.1:1"}};
        for (size_t b = 0; b < 3; b++) {
            int overridden = 0;
            for (size_t i = 0; i < nargs; i++)
                overridden |= strcmp(args[i], base[b][0]) == 0;
            if (!overridden) {
                argv[n++] = base[b][0];
                argv[n++] = base[b][1];
            }
        }
    }
    for (size_t i = 0; i < nargs; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    char *out = NULL;
    int rc = run_command(argv, 10000, &out);
    char shown[256];
    snprintf(shown, sizeof shown, "%s%s%s", nargs ? args[0] : "(env)", nargs > 1 ? " " : "",
             nargs > 1 ? args[1] : "");
    cr_assert_eq(rc, 2, "'%s': exit %d, expected 2; output: %s", shown, rc, out ? out : "");
    cr_assert_not_null(out);
    size_t len = strlen(out);
    cr_assert_gt(len, 1, "'%s': no error line", shown);
    cr_assert_eq(out[len - 1], '\n', "'%s': output does not end with a newline: %s", shown, out);
    cr_assert_null(memchr(out, '\n', len - 1), "'%s': more than one line: %s", shown, out);
    free(out);
}

Test(app_cli, bad_options_exit_2, .timeout = 30)
{
    APP_SETUP_OK();
    struct {
        const char *a[3];
        size_t n;
    } cases[] = {
        {{"--no-such-option"}, 1},
        {{"--threads", "0"}, 2},
        {{"--threads", "abc"}, 2},
        {{"--threads"}, 1},
        {{"--listen", "bad"}, 2},
        {{"--listen", "127.0.0.1:99999"}, 2},
        {{"--listen", "127.0.0.1:http"}, 2},
        {{"--strategy", "bogus"}, 2},
        /* A sentinel list keeps its commas; without its /name it is refused. */
        {{"--redis", "sentinel://127.0.0.1:1,127.0.0.1:2"}, 2},
        {{"--redis", "127.0.0.1:1,sentinel://127.0.0.1:1,127.0.0.1:2/"}, 2},
        {{"--lock-ttl", "abc"}, 2},
        {{"--lock-wait", "-5"}, 2},
        {{"--db", "/nonexistent/dir/x.db"}, 2},
        {{"--hold-log", "/nonexistent/dir/holds.log"}, 2},
        {{"stray-argument"}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_usage_error(cases[i].a, cases[i].n, 1);
    /* Nothing of the refused runs was left behind as a database. */
    cr_assert_neq(access(g_app.db, F_OK), 0, "a refused start created %s", g_app.db);
}

/* An RLIMIT_NOFILE below what --max-connections and the store and Redis
 * connections need is refused at start, in one line saying what is
 * needed (a server past it would close connections unanswered, EMFILE). */
Test(app_cli, too_few_descriptors_exit_2, .timeout = 30)
{
    APP_SETUP_OK();
    /* util-linux's prlimit sets the limit, then execs the server. */
    if (access("/usr/bin/prlimit", X_OK) != 0)
        cr_skip_test("no /usr/bin/prlimit (util-linux) to lower RLIMIT_NOFILE with");
    const char *argv[] = {"/usr/bin/prlimit", "--nofile=256:256", server_bin(), "--listen", "127.0.0.1:0", "--db", g_app.db,
                          "--redis", "127.0.0.1:1", "--max-connections", "1024", NULL};
    char *out = NULL;
    int rc = run_command(argv, 10000, &out);
    cr_assert_eq(rc, 2, "exit %d, expected 2; output: %s", rc, out ? out : "");
    cr_assert(out != NULL && strstr(out, "RLIMIT_NOFILE is 256") != NULL && strstr(out, "--max-connections 1024") != NULL,
              "no clear message: %s", out ? out : "");
    cr_assert_null(memchr(out, '\n', strlen(out) - 1), "more than one line: %s", out);
    free(out);
}

Test(app_cli, bad_env_exit_2, .timeout = 30)
{
    APP_SETUP_OK();
    const char *vars[][2] = {
        {"COUPON_STRATEGY", "bogus"},
        {"COUPON_THREADS", "0"},
        {"COUPON_LISTEN", "bad"},
        {"COUPON_DB", "/nonexistent/dir/x.db"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        cr_assert_eq(setenv(vars[i][0], vars[i][1], 1), 0);
        /* Only what the variable does not set comes from the command line. */
        const char *args[6];
        size_t n = 0;
        if (strcmp(vars[i][0], "COUPON_LISTEN") != 0) {
            args[n++] = "--listen";
            args[n++] = "127.0.0.1:0";
        }
        if (strcmp(vars[i][0], "COUPON_DB") != 0) {
            args[n++] = "--db";
            args[n++] = g_app.db;
        }
        args[n++] = "--redis";
        args[n++] = "127.0.0.1:1";
        expect_usage_error(args, n, 0);
        unsetenv(vars[i][0]);
    }
}

Test(app_cli, env_vars_are_read, .timeout = 40)
{
    APP_SETUP_OK();
    char env_db[320], listen[64], line[256];
    app_env_up(&g_app, 1, 0, 0, NULL);
    int want_port = free_loopback_port();
    cr_assert_gt(want_port, 0);
    snprintf(env_db, sizeof env_db, "%s/from-env.db", g_app.dir);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", want_port);
    cr_assert_eq(setenv("COUPON_LISTEN", listen, 1), 0);
    cr_assert_eq(setenv("COUPON_DB", env_db, 1), 0);
    cr_assert_eq(setenv("COUPON_REDIS", g_app.redis[0].addr, 1), 0);
    cr_assert_eq(setenv("COUPON_ADMIN_TOKEN", APP_TOKEN, 1), 0);
    /* atomic-sql stores fence 0: the records show the variable was read. */
    cr_assert_eq(setenv("COUPON_STRATEGY", "atomic-sql", 1), 0);
    cr_assert_eq(setenv("COUPON_THREADS", "3", 1), 0);
    cr_assert_eq(setenv("COUPON_LOCK_WAIT_MS", "300", 1), 0);
    cr_assert_eq(setenv("COUPON_LOCK_TTL_MS", "3000", 1), 0);

    const char *argv[] = {NULL, NULL};
    spawn_line(argv, line, sizeof line);
    cr_assert_eq(parse_start_line(line), want_port, "start line '%s', expected port %d", line,
                 want_port);

    server_proc s = {0};
    s.port = want_port;
    snprintf(s.url, sizeof s.url, "http://127.0.0.1:%d", want_port);
    long long id = app_create_coupon(&s, "env coupon", 5, 1);
    app_claim_expect(&s, "POST", id, "envuser", 200, 0, 0);

    cr_assert_eq(wait_child(g_child, SIGTERM), 0);
    g_child = 0;
    app_coupon_state st;
    app_db_state(env_db, id, &st);
    cr_assert_eq(st.total, 5);
    cr_assert_eq(st.stock, 4);
    cr_assert_eq(st.records, 1);
    cr_assert_eq(app_db_int(env_db, "SELECT fence FROM coupon_record WHERE user_id='envuser'"), 0);
}

Test(app_cli, start_line_has_real_port, .timeout = 30)
{
    APP_SETUP_OK();
    char line[256];
    const char *argv[] = {NULL, "--listen", "127.0.0.1:0", "--db", g_app.db,
                          "--redis", "127.0.0.1:1", NULL};
    spawn_line(argv, line, sizeof line);
    int port = parse_start_line(line);

    server_proc s = {0};
    snprintf(s.url, sizeof s.url, "http://127.0.0.1:%d", port);
    char url[128];
    app_url(url, sizeof url, &s, "/api/v1/coupon");
    http_reply r = {0};
    cr_assert_eq(http_request("GET", url, NULL, NULL, &r), 0, "nothing answers on port %d", port);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
    cr_assert_eq(wait_child(g_child, SIGTERM), 0);
    g_child = 0;
}

Test(app_cli, sigterm_exits_0, .timeout = 30)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "t", 2, 1);
    app_claim_expect(&g_app.srv[0], "POST", id, "u", 200, 0, 0);
    int code = -1;
    cr_assert_eq(server_stop(&g_app.srv[0], SIGTERM, &code), 0);
    cr_assert_eq(code, 0, "exit status %d after SIGTERM", code);
    /* The DB was closed cleanly: the claim is there and the file is consistent. */
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record"), 1);
    cr_assert_eq(app_db_int(g_app.db, "SELECT stock FROM coupon WHERE id=%lld", id), 1);
}

Test(app_cli, sigint_exits_0, .timeout = 30)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 0, NULL);
    app_server_up(&g_app.srv[0], "--db", g_app.db, "--redis", g_app.redis[0].addr, NULL);
    http_reply r;
    app_request(&g_app.srv[0], "GET", "/api/v1/coupon", NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
    int code = -1;
    cr_assert_eq(server_stop(&g_app.srv[0], SIGINT, &code), 0);
    cr_assert_eq(code, 0, "exit status %d after SIGINT", code);
}

/* -h is --help; --version prints "<binary> <project version>" and exits 0,
 * the same version for the three programs (one CMake project version). */
Test(app_cli, help_short_and_version, .timeout = 30)
{
    const char *h[] = {server_bin(), "-h", NULL};
    char *out = NULL;
    cr_assert_eq(run_command(h, 10000, &out), 0, "%s", out ? out : "");
    cr_assert(strncmp(out, "usage: ", 7) == 0, "%s", out);
    const char *must[] = {"--log-level", "COUPON_LOG_LEVEL", "--access-log", "COUPON_ACCESS_LOG", "--version"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_assert_not_null(strstr(out, must[i]), "-h lacks %s:\n%s", must[i], out);
    free(out);

    const char *bins[][2] = {{"COUPON_SERVER_BIN", "coupon-server"},
                             {"COUPON_LOADTEST_BIN", "coupon-loadtest"},
                             {"DLOCK_BENCH_BIN", "dlock-bench"}};
    for (size_t i = 0; i < 3; i++) {
        const char *bin = getenv(bins[i][0]);
        if (bin == NULL || bin[0] == '\0') {
            cr_assert(i > 0, "COUPON_SERVER_BIN is not set");
            cr_log_warn("%s not set (%s not built): its --version is not checked", bins[i][0], bins[i][1]);
            continue;
        }
        const char *v[] = {bin, "--version", NULL};
        char want[128];
        snprintf(want, sizeof want, "%s %s\n", bins[i][1], COUPON_VERSION);
        out = NULL;
        cr_assert_eq(run_command(v, 10000, &out), 0, "%s --version: %s", bins[i][1], out ? out : "");
        cr_assert_str_eq(out, want);
        free(out);
        const char *sh[] = {bin, "-h", NULL};
        out = NULL;
        cr_assert_eq(run_command(sh, 10000, &out), 0, "%s -h: %s", bins[i][1], out ? out : "");
        cr_assert(strstr(out, "usage: ") != NULL, "%s -h: %s", bins[i][1], out);
        free(out);
    }
}

/* --redis takes libdlock's sentinel:// form (its commas stay inside it):
 * a claim locks on the master the sentinel names, and the fence it stores
 * is that master's counter. */
Test(app_cli, redis_through_sentinel, .timeout = 40)
{
    APP_SETUP_OK();
    redis_proc master = {0};
    sentinel_proc sent = {0};
    char redis[256], line[256], key[64], fence[64];

    cr_assert_eq(redis_start(&master), 0);
    cr_assert_eq(sentinel_start(&sent, "m", master.port, 5000, 10000), 0);
    /* A dead sentinel first, then the live one. */
    snprintf(redis, sizeof redis, "sentinel://127.0.0.1:%d,%s/m", free_loopback_port(), sent.addr);
    const char *argv[] = {NULL, "--listen", "127.0.0.1:0", "--db", g_app.db, "--redis", redis,
                          "--admin-token", APP_TOKEN, NULL};
    spawn_line(argv, line, sizeof line);
    server_proc s = {0};
    s.port = parse_start_line(line);
    snprintf(s.url, sizeof s.url, "http://127.0.0.1:%d", s.port);
    long long id = app_create_coupon(&s, "sentinel coupon", 5, 1);
    app_claim_expect(&s, "POST", id, "sentineluser", 200, 0, 0);
    cr_assert_eq(wait_child(g_child, SIGTERM), 0);
    g_child = 0;
    long long stored =
        app_db_int(g_app.db, "SELECT fence FROM coupon_record WHERE user_id='sentineluser'");
    snprintf(key, sizeof key, "fence:coupon:%lld", id);
    const char *get[2] = {"GET", key};
    cr_assert_eq(redis_cmd(&master, fence, sizeof fence, 2, get), 0);
    cr_assert_gt(stored, 0);
    cr_assert_eq(atoll(fence), stored, "master fence %s, stored %lld", fence, stored);
    sentinel_stop(&sent);
    redis_stop(&master);
}
