/* load.c - how coupon-loadtest makes and measures its load, against
 * real coupon-servers:
 *   - reconnects to a dead server are bounded and reported apart from
 *     answers;
 *   - --rate holds its rate and charges a stall to the requests that were
 *     due during it;
 *   - --warmup leaves the first seconds out of the numbers but not out of
 *     the audit;
 *   - the latency split by outcome and the --timeline CSV add up to the
 *     totals. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_test_util.h"

static lt_rig rig;
static char *out;
static json_t *root;
static char dir[256]; /* a temp dir for the timeline file, when a test makes one */

static void fini(void)
{
    json_decref(root);
    root = NULL;
    free(out);
    out = NULL;
    lt_rig_down(&rig);
    lt_rmdir_flat(dir);
    dir[0] = '\0';
}

static void up1(void)
{
    lt_rig_up(&rig, 1, NULL);
}

/* A lock that is hard to get: 5 ms of work under it and a 1 ms wait, so
 * 8 connections at once meet 1005 (the third 503 column is the fence's). */
static void up1_busy_lock(void)
{
    const char *extra[] = {"--work-us", "5000", "--lock-wait", "1", NULL};
    lt_rig_up(&rig, 1, extra);
}

/* The --json report in out; stderr lines (an audit that could not read a
 * source) may come before it, so it starts at the first line that is "{". */
static json_t *report_json(void)
{
    json_error_t jerr;
    const char *start = out[0] == '{' ? out : strstr(out, "\n{");
    cr_assert_not_null(start, "no JSON report in:\n%s", out);
    if (*start == '\n')
        start++;
    json_t *r = json_loads(start, JSON_DISABLE_EOF_CHECK, &jerr);
    cr_assert_not_null(r, "the report is not JSON (%s):\n%s", jerr.text, out);
    return r;
}

static json_t *obj(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_object(v), "\"%s\" is not an object:\n%s", key, out);
    return v;
}

static double jreal(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_real(v), "\"%s\" is not a number:\n%s", key, out);
    return json_real_value(v);
}

/* The latency split: every outcome's count adds up to the answers, and
 * each outcome's percentiles rise with the percentile. */
static void assert_outcomes_sum(const json_t *r)
{
    const char *names[] = {"won", "sold_out", "503", "other"};
    const char *pcts[] = {"p50", "p90", "p99", "p99.9", "max"};
    json_t *by = obj(r, "latency_ms_by_outcome");
    long long sum = 0;
    cr_assert_eq(json_object_size(by), 4, "%s", out);
    for (size_t i = 0; i < 4; i++) {
        json_t *one = obj(by, names[i]);
        double prev = 0;
        sum += lt_jint(one, "count");
        for (size_t k = 0; k < 5; k++) {
            double v = jreal(one, pcts[k]);
            cr_assert_geq(v, prev, "%s.%s below the previous percentile:\n%s", names[i], pcts[k], out);
            prev = v;
        }
    }
    cr_assert_eq(sum, lt_jint(r, "answered"), "outcomes sum to %lld:\n%s", sum, out);
    cr_assert_eq(lt_jint(obj(r, "latency_ms"), "count"), lt_jint(r, "answered"));
    cr_assert_eq(lt_jint(obj(by, "won"), "count"), lt_jint(r, "successes"));
    cr_assert_geq(jreal(obj(r, "latency_ms"), "p99.9"), jreal(obj(r, "latency_ms"), "p99"));
}

Test(loadtest_load, dead_server_reconnects_are_bounded_and_apart, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    lt_bg_run b;
    long long coupon = lt_create_coupon(&rig, 0, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    /* Stock 0: every answer is a fast 1003, so the run is busy when the
     * server dies; nothing listens on its port afterwards. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "4",
                       "--duration", "20", "--give-up-ms", "1000", "--json", "--quiet", NULL};
    lt_bg_start(&b, a);
    test_sleep_ms(1000);
    cr_assert_eq(server_stop(&rig.srv[0], SIGKILL, NULL), 0);
    int64_t killed = test_now_ms();
    lt_bg_join(&b);
    int64_t ended = test_now_ms();
    out = b.output;
    cr_assert_eq(b.status, 2, "exit %d:\n%s", b.status, out);
    root = report_json();
    json_t *c = obj(root, "connects");
    long long attempts = lt_jint(c, "attempts"), failures = lt_jint(c, "failures");
    /* Every connection failed at least once and then gave up: the run ended
     * on its own, long before --duration 20. */
    cr_assert_eq(lt_jint(c, "gave_up"), 4, "%s", out);
    cr_assert_lt(ended - killed, 8000, "the run went on for %lld ms after the kill",
                 (long long)(ended - killed));
    cr_assert_geq(failures, 4, "%s", out);
    cr_assert_geq(lt_jint(obj(c, "by_kind"), "Couldn't connect to server"), 4, "%s", out);
    /* The back-off: waits of at least 5, 10, 20, ... 320, 500 ms, so within
     * the 1 s before giving up a connection fails at most 9 times (without
     * it, tens of thousands). */
    cr_assert_leq(failures, 4 * 9, "%lld failed connects:\n%s", failures, out);
    cr_assert_leq(attempts, failures + 4 * 2, "%lld attempts:\n%s", attempts, out);
    /* Each connection held at most one request when it gave up. */
    cr_assert_leq(lt_jint(c, "unsent"), 4, "%s", out);
    /* Throughput counts answers only, refused connects are no requests. */
    long long answered = lt_jint(root, "answered");
    cr_assert_gt(answered, 0, "%s", out);
    cr_assert_eq(lt_jint(root, "requests"), answered + lt_jint(obj(root, "errors"), "total"));
    double expect = (double)answered / jreal(root, "elapsed_s");
    cr_assert(fabs(jreal(root, "throughput") - expect) <= expect * 1e-6 + 1e-9,
              "throughput %f, answered/elapsed %f:\n%s", jreal(root, "throughput"), expect, out);
    cr_assert_eq(lt_jint(obj(root, "by_code"), "1003"), answered, "%s", out);
    assert_outcomes_sum(root);
}

Test(loadtest_load, dead_server_text_report_names_the_connects, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    lt_bg_run b;
    long long coupon = lt_create_coupon(&rig, 0, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "1", "--connections", "2",
                       "--duration", "20", "--give-up-ms", "500", "--quiet", NULL};
    lt_bg_start(&b, a);
    test_sleep_ms(800);
    cr_assert_eq(server_stop(&rig.srv[0], SIGKILL, NULL), 0);
    lt_bg_join(&b);
    out = b.output;
    cr_assert_eq(b.status, 2, "exit %d:\n%s", b.status, out);
    char line[512];
    cr_assert_eq(text_line(out, "connects:", NULL, line, sizeof line), 0, "no connects line:\n%s", out);
    unsigned long long attempts = 0, failed = 0, gave_up = 0;
    cr_assert_eq(sscanf(line, "connects: %llu attempts, %llu failed", &attempts, &failed), 2, "%s", line);
    cr_assert_geq(failed, 2, "%s", line);
    cr_assert_leq(failed, 2 * 9, "%s", line);
    const char *g = strstr(line, "; ");
    cr_assert_not_null(g, "%s", line);
    cr_assert_eq(sscanf(g, "; %llu connections gave up", &gave_up), 1, "%s", line);
    cr_assert_eq(gave_up, 2, "%s", line);
    cr_assert_not_null(strstr(line, "Couldn't connect to server"), "%s", line);
    cr_assert_eq(text_line(out, "requests:", " answered in ", line, sizeof line), 0, "%s", out);
}

Test(loadtest_load, rate_is_held_and_outcomes_add_up, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    long long coupon = lt_create_coupon(&rig, 100, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    /* 300/s for 2 s: requests 0..599 are due before the end, and only they. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "8",
                       "--duration", "2", "--rate", "300", "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = report_json();
    cr_assert_eq(lt_jint(root, "answered"), 600, "%s", out);
    cr_assert_eq(lt_jint(root, "requests"), 600, "%s", out);
    cr_assert_eq(jreal(root, "rate"), 300.0);
    /* The answers came at the rate, not as fast as the server could go
     * (a closed loop here answers thousands per second, in ~0.1 s). The
     * upper slack is for a loaded machine: the last requests may be
     * answered late, never sent early. */
    double elapsed = jreal(root, "elapsed_s");
    cr_assert(elapsed >= 1.99 && elapsed < 3.0, "elapsed %f:\n%s", elapsed, out);
    double tp = jreal(root, "throughput");
    cr_assert(tp > 200 && tp < 300 * 1.01, "throughput %f at --rate 300:\n%s", tp, out);
    cr_assert_eq(lt_jint(root, "successes"), 100);
    cr_assert_eq(lt_jint(obj(obj(root, "latency_ms_by_outcome"), "sold_out"), "count"), 500, "%s", out);
    assert_outcomes_sum(root);
}

static void *pause_server(void *arg)
{
    (void)arg;
    test_sleep_ms(700);
    if (server_pause(&rig.srv[0]) == 0) {
        test_sleep_ms(500);
        server_resume(&rig.srv[0]);
    }
    return NULL;
}

Test(loadtest_load, rate_charges_a_stall_to_every_request_due_in_it, .init = up1, .fini = fini,
     .timeout = 120)
{
    char id[32];
    pthread_t t;
    long long coupon = lt_create_coupon(&rig, 0, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    /* A 500 ms stall in a 2.5 s run at 200/s: ~100 of the 500 requests are
     * due while the server is stopped. Each waits from its due time until
     * the server is back (from 500 ms down to 0), so more than 10 % wait
     * over 100 ms. A closed loop would charge the stall to the 4
     * requests in flight only, and its p90 would stay near 1 ms. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "1", "--connections", "4",
                       "--duration", "2.5", "--rate", "200", "--json", "--quiet", NULL};
    cr_assert_eq(pthread_create(&t, NULL, pause_server, NULL), 0);
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = report_json();
    cr_assert_eq(lt_jint(root, "answered"), 500, "%s", out);
    json_t *lat = obj(root, "latency_ms");
    cr_assert_geq(jreal(lat, "p90"), 100.0, "the stall is hidden: p90 %f ms:\n%s", jreal(lat, "p90"), out);
    cr_assert_geq(jreal(lat, "max"), 350.0, "%s", out);
    assert_outcomes_sum(root);
}

Test(loadtest_load, warmup_is_left_out_of_the_numbers_not_the_audit, .init = up1, .fini = fini,
     .timeout = 120)
{
    char id[32];
    long long coupon = lt_create_coupon(&rig, 100, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    /* At 200/s the stock of 100 sells out in the first 0.5 s: inside the
     * 1 s warm-up, so the measured part has no success at all. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "1", "--connections", "4",
                       "--duration", "2", "--rate", "200", "--warmup", "1", "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = report_json();
    json_t *w = obj(root, "warmup");
    cr_assert_eq(lt_jint(w, "answered"), 200, "%s", out);
    cr_assert_eq(lt_jint(w, "successes"), 100, "%s", out);
    cr_assert_eq(lt_jint(root, "answered"), 200, "%s", out);
    cr_assert_eq(lt_jint(root, "successes"), 0, "%s", out);
    cr_assert_eq(lt_jint(obj(root, "latency_ms"), "count"), 200);
    cr_assert_eq(lt_jint(obj(root, "by_code"), "1003"), 200, "%s", out);
    /* Throughput over the measured second only. */
    double elapsed = jreal(root, "elapsed_s");
    cr_assert(elapsed >= 0.99 && elapsed < 2.0, "elapsed %f:\n%s", elapsed, out);
    /* The audit saw the warm-up's successes: 100 seen, 100 issued. */
    json_t *audit = obj(root, "audit");
    cr_assert_eq(lt_jint(audit, "successes_seen"), 100, "%s", out);
    cr_assert_eq(lt_jint(audit, "issued_delta"), 100, "%s", out);
    cr_assert_str_eq(json_string_value(json_object_get(root, "verdict")), "NO OVERSELL");
    assert_outcomes_sum(root);
}

/* The CSV's columns, in order. */
#define TL_COLS 9
static const char *const tl_header = "t_ms,answered,won,503_1005,503_1006,503_1010,errors,p50_ms,p99_ms";

/* Reads the timeline at path, checks its form, and sums its columns 1..6
 * into sums[1..6]; returns the number of data lines. */
static size_t read_timeline(const char *path, long long sums[TL_COLS])
{
    char line[512];
    size_t rows = 0;
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no timeline at %s", path);
    memset(sums, 0, TL_COLS * sizeof sums[0]);
    cr_assert_not_null(fgets(line, sizeof line, f), "empty timeline");
    line[strcspn(line, "\n")] = '\0';
    cr_assert_str_eq(line, tl_header);
    while (fgets(line, sizeof line, f) != NULL) {
        char *fields[TL_COLS + 1];
        size_t n = 0;
        char *p = line;
        cr_assert_not_null(strchr(line, '\n'), "line %zu is cut short", rows + 2);
        line[strcspn(line, "\n")] = '\0';
        /* strsep keeps empty fields (the percentiles of an empty bucket). */
        while (p != NULL && n <= TL_COLS)
            fields[n++] = strsep(&p, ",");
        cr_assert_eq(n, TL_COLS, "line %zu has %zu fields: %s", rows + 2, n, line);
        long long t = strtoll(fields[0], NULL, 10);
        cr_assert_eq(t, (long long)rows * 250, "line %zu: t_ms %s, want %zu", rows + 2, fields[0],
                     rows * 250);
        for (size_t k = 1; k <= 6; k++) {
            char *end = NULL;
            long long v = strtoll(fields[k], &end, 10);
            cr_assert(*fields[k] != '\0' && *end == '\0' && v >= 0, "line %zu col %zu: '%s'", rows + 2, k,
                      fields[k]);
            sums[k] += v;
        }
        long long answered = strtoll(fields[1], NULL, 10);
        if (answered == 0) {
            cr_assert(fields[7][0] == '\0' && fields[8][0] == '\0', "line %zu: latency without answers",
                      rows + 2);
        } else {
            char *e1 = NULL, *e2 = NULL;
            double p50 = strtod(fields[7], &e1), p99 = strtod(fields[8], &e2);
            cr_assert(*e1 == '\0' && *e2 == '\0' && p50 > 0 && p99 >= p50, "line %zu: p50 '%s' p99 '%s'",
                      rows + 2, fields[7], fields[8]);
        }
        cr_assert_leq(strtoll(fields[2], NULL, 10), answered);
        rows++;
    }
    fclose(f);
    return rows;
}

static long long code_count(const json_t *r, const char *code)
{
    json_t *v = json_object_get(obj(r, "by_code"), code);
    return v == NULL ? 0 : (long long)json_integer_value(v);
}

Test(loadtest_load, timeline_is_well_formed_and_adds_up, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32], path[320];
    long long sums[TL_COLS];
    long long coupon = lt_create_coupon(&rig, 100, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    lt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "4",
                       "--duration", "2", "--rate", "300", "--warmup", "0.5", "--timeline", path,
                       "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = report_json();
    size_t rows = read_timeline(path, sums);
    /* 2 s: buckets 0..7, and a few more if the last answers come late. */
    cr_assert(rows >= 8 && rows <= 12, "%zu buckets", rows);
    /* The timeline covers the warm-up too. */
    json_t *w = obj(root, "warmup");
    cr_assert_eq(sums[1], lt_jint(root, "answered") + lt_jint(w, "answered"));
    cr_assert_eq(sums[1], 600);
    cr_assert_eq(sums[2], lt_jint(root, "successes") + lt_jint(w, "successes"));
    cr_assert_eq(sums[2], 100);
    cr_assert_eq(sums[3] + sums[4] + sums[5], 0);
    cr_assert_eq(sums[6], lt_jint(obj(root, "errors"), "total") + lt_jint(w, "errors"));
}

Test(loadtest_load, timeline_counts_the_503s_by_code, .init = up1_busy_lock, .fini = fini, .timeout = 120)
{
    char id[32], path[320];
    long long sums[TL_COLS];
    long long coupon = lt_create_coupon(&rig, 1000000, 0);
    snprintf(id, sizeof id, "%lld", coupon);
    lt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "8",
                       "--requests", "400", "--timeline", path, "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = report_json();
    (void)read_timeline(path, sums);
    cr_assert_eq(sums[1], 400);
    cr_assert_eq(sums[2], lt_jint(root, "successes"));
    cr_assert_gt(sums[3], 0, "no 1005 with a 1 ms lock wait:\n%s", out);
    cr_assert_eq(sums[3], code_count(root, "1005"), "%s", out);
    cr_assert_eq(sums[4], code_count(root, "1006"), "%s", out);
    cr_assert_eq(sums[5], code_count(root, "1010"), "%s", out);
    /* The 503 outcome is exactly those answers. */
    json_t *by_status = obj(root, "by_status");
    json_t *s503 = json_object_get(by_status, "503");
    cr_assert_not_null(s503, "%s", out);
    cr_assert_eq(lt_jint(obj(obj(root, "latency_ms_by_outcome"), "503"), "count"), json_integer_value(s503));
    cr_assert_eq(json_integer_value(s503), sums[3] + sums[4] + sums[5]);
    assert_outcomes_sum(root);
}

Test(loadtest_load, timeline_path_that_cannot_be_written_is_exit_2, .init = up1, .fini = fini, .timeout = 60)
{
    char id[32];
    long long coupon = lt_create_coupon(&rig, 10, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--requests", "10", "--timeline",
                       "/nonexistent-dir/t.csv", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 2, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "--timeline: cannot write /nonexistent-dir/t.csv"), "%s", out);
    /* Before any load: the stock is untouched. */
    cr_assert_null(strstr(out, "verdict"), "%s", out);
}
