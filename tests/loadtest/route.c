/* route.c - coupon-loadtest --route: which server each claim reaches.
 *   - the hash (lt_route_coupon) is stable, even over 2, 3 and 5 URLs, and
 *     consistent: a URL added at the end takes only its share, from all;
 *   - against two real coupon-servers on one store, each writing the shared
 *     --hold-log (one line per lock hold: its pid and the records it wrote):
 *     with --route coupon every record of a coupon was written by the one
 *     server the hash names (exact, each record accounted for), over several
 *     coupons (--coupons) and for one (--coupon); with the default (rr) the
 *     claims of every coupon reach both servers;
 *   - a bad --route, and --route coupon with --bundle, are usage errors. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include "loadtest.h"
#include "lt_test_util.h"
#include "procs.h"

#define N_COUPONS 8
#define MAX_RECORDS 4096

static lt_rig rig;
static char logdir[256];
static char hold_log[320];

static void fini(void)
{
    lt_rig_down(&rig);
    lt_rmdir_flat(logdir);
    logdir[0] = '\0';
}

TestSuite(loadtest_route, .fini = fini, .timeout = 120);

/* Two servers on one store, both appending to one hold log. */
static void up_two(void)
{
    lt_tmpdir(logdir, sizeof logdir);
    snprintf(hold_log, sizeof hold_log, "%s/holds.log", logdir);
    const char *extra[] = {"--hold-log", hold_log, NULL};
    lt_rig_up(&rig, 2, extra);
}

/* Who wrote each record: the pid of the hold line that lists it. */
typedef struct writer {
    long long record;
    long pid;
} writer;

static size_t read_hold_log(writer *w, size_t cap)
{
    FILE *f = fopen(hold_log, "r");
    char line[8192];
    size_t n = 0;
    cr_assert_not_null(f, "no hold log %s", hold_log);
    while (fgets(line, sizeof line, f) != NULL) {
        const char *pid = strstr(line, " pid="), *recs = strstr(line, " records=");
        if (strncmp(line, "hold ", 5) != 0 || strstr(line, " outcome=applied ") == NULL)
            continue;
        cr_assert(pid != NULL && recs != NULL, "a hold line without pid or records: %s", line);
        long p = strtol(pid + 5, NULL, 10);
        for (const char *c = recs + 9; *c >= '0' && *c <= '9';) {
            char *end = NULL;
            long long id = strtoll(c, &end, 10);
            cr_assert_lt(n, cap, "more records in the hold log than %zu", cap);
            w[n].record = id;
            w[n].pid = p;
            n++;
            c = *end == ',' ? end + 1 : end;
        }
    }
    cr_assert_eq(fclose(f), 0);
    return n;
}

static long writer_of(const writer *w, size_t n, long long record)
{
    long found = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i].record != record)
            continue;
        cr_assert_eq(found, 0, "record %lld listed by two holds", record);
        found = w[i].pid;
    }
    return found;
}

/* Per coupon (first .. first + n - 1): how many of its records each server
 * wrote, from the store's records and the hold log; every record of these
 * coupons must be in the log. The log line is written after the commit and
 * may trail the answer by a moment, so a missing record is waited for. */
static void records_by_server(long long first, int n, long long (*by)[2])
{
    static writer w[MAX_RECORDS];
    for (int attempt = 0;; attempt++) {
        size_t nw = read_hold_log(w, MAX_RECORDS);
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        long long missing = -1;
        memset(by, 0, sizeof *by * (size_t)n);
        cr_assert_eq(sqlite3_open_v2(rig.db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_prepare_v2(db, "SELECT id, coupon_id FROM coupon_record ORDER BY id", -1, &st, NULL),
                     SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            long long id = sqlite3_column_int64(st, 0), coupon = sqlite3_column_int64(st, 1);
            cr_assert(coupon >= first && coupon < first + n, "record %lld of coupon %lld: not ours", id, coupon);
            long pid = writer_of(w, nw, id);
            if (pid == rig.srv[0].pid)
                by[coupon - first][0]++;
            else if (pid == rig.srv[1].pid)
                by[coupon - first][1]++;
            else if (missing < 0)
                missing = id;
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        if (missing < 0)
            return;
        cr_assert_lt(attempt, 50, "record %lld is in no hold of either server (pids %d, %d)", missing,
                     (int)rig.srv[0].pid, (int)rig.srv[1].pid);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static json_t *run_json(const char *const *args)
{
    char *out = NULL;
    int st = lt_run_loadtest(args, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out ? out : "");
    const char *brace = out != NULL ? strchr(out, '{') : NULL;
    cr_assert_not_null(brace, "no JSON report:\n%s", out ? out : "");
    json_error_t err;
    json_t *root = json_loads(brace, JSON_DISABLE_EOF_CHECK, &err);
    cr_assert_not_null(root, "%s:\n%s", err.text, out);
    free(out);
    return root;
}

static long long make_coupons(int n)
{
    long long first = 0;
    for (int i = 0; i < n; i++) {
        long long id = lt_create_coupon(&rig, 100000, 1);
        if (i == 0)
            first = id;
        cr_assert_eq(id, first + i, "coupon ids not consecutive");
    }
    return first;
}

/* The claims of many coupons: route given ("coupon") or not (NULL). */
static void spread_run(long long first, const char *route, long long (*by)[2])
{
    char coupon[24];
    snprintf(coupon, sizeof coupon, "%lld", first);
    const char *args[] = {"--url", rig.urls, "--coupon", coupon, "--coupons", "8", "--connections", "8",
                          "--threads", "2", "--requests", "400", "--db", rig.db_path, "--json", "--quiet",
                          route ? "--route" : NULL, route, NULL};
    json_t *r = run_json(args);
    cr_assert_str_eq(json_string_value(json_object_get(r, "verdict")), "NO OVERSELL");
    cr_assert_str_eq(json_string_value(json_object_get(r, "route")), route ? route : "rr");
    cr_assert_eq(lt_jint(r, "successes"), 400);
    json_decref(r);
    records_by_server(first, N_COUPONS, by);
}

Test(loadtest_route, hash_is_stable_even_and_consistent)
{
    enum { IDS = 30000 };
    static const size_t sizes[] = {2, 3, 5};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], count[6] = {0}, moved = 0;
        for (int64_t id = 1; id <= IDS; id++) {
            size_t u = lt_route_coupon(id, n), grown = lt_route_coupon(id, n + 1);
            cr_assert_lt(u, n);
            cr_assert_eq(lt_route_coupon(id, n), u, "coupon %" PRId64 " moved between two calls", id);
            count[u]++;
            /* Consistent: a coupon either stays or goes to the new last URL. */
            cr_assert(grown == u || grown == n, "coupon %" PRId64 ": URL %zu of %zu became %zu of %zu", id, u, n,
                      grown, n + 1);
            moved += grown != u;
        }
        for (size_t u = 0; u < n; u++)
            cr_assert(count[u] > IDS / n * 95 / 100 && count[u] < IDS / n * 105 / 100,
                      "URL %zu of %zu got %zu of %d coupons", u, n, count[u], IDS);
        cr_assert(moved > IDS / (n + 1) * 95 / 100 && moved < IDS / (n + 1) * 105 / 100,
                  "a URL added to %zu moved %zu of %d coupons", n, moved, IDS);
    }
    cr_assert_eq(lt_route_coupon(42, 1), 0);
}

Test(loadtest_route, route_coupon_keeps_each_coupon_on_its_server)
{
    long long by[N_COUPONS][2];
    int owned[2] = {0, 0};
    up_two();
    long long first = make_coupons(N_COUPONS);
    spread_run(first, "coupon", by);
    for (int c = 0; c < N_COUPONS; c++) {
        size_t want = lt_route_coupon(first + c, 2);
        cr_assert_gt(by[c][want], 0, "coupon %lld: no claim on its server %zu", first + c, want);
        cr_assert_eq(by[c][1 - want], 0, "coupon %lld: %lld claims on server %zu, %lld on the other", first + c,
                     by[c][want], want, by[c][1 - want]);
        owned[want]++;
    }
    /* Both servers own coupons, so the run shows routing, not one server. */
    cr_assert(owned[0] > 0 && owned[1] > 0, "coupons %lld..%lld all hash to one server", first,
              first + N_COUPONS - 1);
}

Test(loadtest_route, round_robin_spreads_each_coupon)
{
    long long by[N_COUPONS][2];
    up_two();
    long long first = make_coupons(N_COUPONS);
    spread_run(first, NULL, by);
    for (int c = 0; c < N_COUPONS; c++)
        cr_assert(by[c][0] > 0 && by[c][1] > 0, "coupon %lld: %lld claims on server 0, %lld on server 1", first + c,
                  by[c][0], by[c][1]);
}

/* One coupon (the epoll workers of worker.c): every connection goes to the
 * coupon's URL with --route coupon, and half to each without. */
Test(loadtest_route, one_coupon_goes_to_one_server)
{
    long long by[1][2];
    char coupon[24];
    up_two();
    long long id = make_coupons(1);
    snprintf(coupon, sizeof coupon, "%lld", id);
    const char *coupon_args[] = {"--url", rig.urls, "--coupon", coupon, "--connections", "8", "--threads", "2",
                                 "--requests", "200", "--db", rig.db_path, "--json", "--quiet", "--route", "coupon",
                                 NULL};
    json_t *r = run_json(coupon_args);
    cr_assert_str_eq(json_string_value(json_object_get(r, "route")), "coupon");
    cr_assert_eq(lt_jint(r, "successes"), 200);
    json_decref(r);
    records_by_server(id, 1, by);
    size_t want = lt_route_coupon(id, 2);
    cr_assert_eq(by[0][want], 200, "%lld of 200 on the coupon's server %zu", by[0][want], want);
    cr_assert_eq(by[0][1 - want], 0);

    const char *rr_args[] = {"--url", rig.urls, "--coupon", coupon, "--connections", "8", "--threads", "2",
                             "--requests", "200", "--db", rig.db_path, "--json", "--quiet", NULL};
    r = run_json(rr_args);
    cr_assert_str_eq(json_string_value(json_object_get(r, "route")), "rr");
    json_decref(r);
    records_by_server(id, 1, by);
    cr_assert(by[0][1 - want] > 0, "rr: no claim reached server %zu", 1 - want);
}

static void usage_error(const char *const *args, const char *needle)
{
    char *out = NULL;
    int st = lt_run_loadtest(args, &out);
    cr_assert_eq(st, 2, "exit %d, not 2:\n%s", st, out ? out : "");
    cr_assert_not_null(strstr(out, needle), "no '%s' in:\n%s", needle, out);
    free(out);
}

Test(loadtest_route, bad_route_is_a_usage_error)
{
    const char *bad[] = {"--url", "http://127.0.0.1:1", "--coupon", "1", "--requests", "1", "--route", "hash", NULL};
    usage_error(bad, "--route: 'hash' is not rr or coupon");
    const char *bundle[] = {"--url", "http://127.0.0.1:1", "--coupons", "4", "--bundle", "2", "--requests", "1",
                            "--route", "coupon", NULL};
    usage_error(bundle, "--route coupon routes one-coupon claims: not with --bundle");
    const char *help[] = {"--help", NULL};
    char *out = NULL;
    cr_assert_eq(lt_run_loadtest(help, &out), 0);
    cr_assert_not_null(strstr(out, "--route rr|coupon"), "--help does not name --route:\n%s", out);
    free(out);
}
