/* health_metrics.c - /healthz reports the DB and the lock service (503
 * naming the part that is down), and /metrics exposes every metric family
 * with counters that move by exactly the requests made. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "hm.db"};
TestSuite(app_health_metrics, .init = app_suite_init, .fini = app_suite_fini, .timeout = 30);

static void start_all(size_t n)
{
    app_env_up(&g_app, n, 0, 1, "--lock-wait", "200", NULL);
}

/* Whether r is status with data {"db", "lock", "nodes_up", "nodes"} as given. */
static int health_is(const http_reply *r, long status, const char *db, const char *lock, long long up,
                     long long nodes)
{
    json_error_t err;
    json_t *root = r->body != NULL ? json_loads(r->body, 0, &err) : NULL;
    json_t *d = json_object_get(root, "data");
    int same = r->status == status && json_is_object(d) &&
               json_is_string(json_object_get(d, "db")) && strcmp(json_string_value(json_object_get(d, "db")), db) == 0 &&
               json_is_string(json_object_get(d, "lock")) &&
               strcmp(json_string_value(json_object_get(d, "lock")), lock) == 0 &&
               json_integer_value(json_object_get(d, "nodes_up")) == up &&
               json_integer_value(json_object_get(d, "nodes")) == nodes;
    json_decref(root);
    return same;
}

/* GET /healthz until it reports the state given (the prober notices a
 * change within about its interval, 500 ms: polled for at most 5 s). Then
 * asserts status, the envelope, the exact data {"db", "lock", "nodes_up",
 * "nodes"} and the result's age (data.age_ms, under the 5 s bound). */
static void expect_health(long status, const char *db, const char *lock, long long up,
                          long long nodes)
{
    http_reply r;
    int64_t until = test_now_ms() + 5000;
    for (;;) {
        app_request(&g_app.srv[0], "GET", "/healthz", NULL, NULL, &r);
        if (health_is(&r, status, db, lock, up, nodes) || test_now_ms() >= until)
            break;
        http_reply_free(&r);
        test_sleep_ms(50);
    }
    json_t *root = app_envelope(&r, status);
    /* 1006: a service the server depends on is unavailable. */
    cr_assert_eq(app_jint(root, "code"), status == 200 ? 0 : 1006, "%s", r.body);
    json_t *data = json_object_get(root, "data");
    cr_assert(json_is_object(data), "healthz data is not an object: %s", r.body);
    cr_assert_str_eq(app_jstr(data, "db"), db, "%s", r.body);
    cr_assert_str_eq(app_jstr(data, "lock"), lock, "%s", r.body);
    cr_assert_eq(app_jint(data, "nodes_up"), up, "%s", r.body);
    cr_assert_eq(app_jint(data, "nodes"), nodes, "%s", r.body);
    long long age = app_jint(data, "age_ms");
    cr_assert(age >= 0 && age < 5000, "age_ms %lld: %s", age, r.body);
    json_decref(root);
    http_reply_free(&r);
}

Test(app_health_metrics, healthz_single_node, .timeout = 30)
{
    APP_SETUP_OK();
    start_all(1);
    expect_health(200, "ok", "ok", 1, 1);

    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    expect_health(503, "ok", "down", 0, 1);
    expect_health(503, "ok", "down", 0, 1);

    /* Back: the prober's next rounds reconnect (polled, bounded). */
    cr_assert_eq(redis_restart(&g_app.redis[0]), 0);
    expect_health(200, "ok", "ok", 1, 1);
}

Test(app_health_metrics, healthz_quorum, .timeout = 30)
{
    APP_SETUP_OK();
    start_all(3);
    expect_health(200, "ok", "ok", 3, 3);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    /* 2 of 3 is a quorum but none to spare: still serving (200), and
     * "degraded" says one more loss stops the claims. */
    expect_health(200, "ok", "degraded", 2, 3);
    cr_assert_eq(redis_kill(&g_app.redis[1]), 0);
    expect_health(503, "ok", "down", 1, 3);
}

Test(app_health_metrics, healthz_without_lock, .timeout = 30)
{
    APP_SETUP_OK();
    /* atomic-sql needs no Redis: its health does not depend on it. */
    app_env_up(&g_app, 1, 0, 0, NULL);
    app_server_up(&g_app.srv[0], "--db", g_app.db, "--redis", g_app.redis[0].addr, "--strategy",
                  "atomic-sql", NULL);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    expect_health(200, "ok", "unused", 0, 0);
}

/* ---- /metrics ---- */

typedef struct sample {
    char key[256]; /* name{labels} exactly as exposed */
    double value;
} sample;

typedef struct scrape {
    sample *s;
    size_t n;
    char *text;
} scrape;

static void scrape_free(scrape *sc)
{
    free(sc->s);
    free(sc->text);
    memset(sc, 0, sizeof *sc);
}

static void do_scrape(scrape *sc)
{
    http_reply r;
    memset(sc, 0, sizeof *sc);
    app_request(&g_app.srv[0], "GET", "/metrics", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(strncmp(r.content_type, "text/plain", 10) == 0, "metrics Content-Type '%s'",
              r.content_type);
    sc->text = strdup(r.body ? r.body : "");
    http_reply_free(&r);
    cr_assert_not_null(sc->text);
    size_t cap = 64;
    sc->s = calloc(cap, sizeof *sc->s);
    cr_assert_not_null(sc->s);
    char *save = NULL;
    char *copy = strdup(sc->text);
    cr_assert_not_null(copy);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *sp = strrchr(line, ' ');
        cr_assert_not_null(sp, "metrics line without a value: %s", line);
        *sp = '\0';
        char *end = NULL;
        double v = strtod(sp + 1, &end);
        cr_assert(end != sp + 1 && *end == '\0', "bad metrics value in '%s %s'", line, sp + 1);
        if (sc->n == cap) {
            cap *= 2;
            sample *ns = realloc(sc->s, cap * sizeof *ns);
            cr_assert_not_null(ns);
            sc->s = ns;
        }
        cr_assert_lt(strlen(line), sizeof sc->s[0].key, "metric key too long: %s", line);
        snprintf(sc->s[sc->n].key, sizeof sc->s[0].key, "%s", line);
        sc->s[sc->n].value = v;
        sc->n++;
    }
    free(copy);
}

/* Value of key, or 0 when absent (counters with no events may be omitted). */
static double val(const scrape *sc, const char *key)
{
    for (size_t i = 0; i < sc->n; i++)
        if (strcmp(sc->s[i].key, key) == 0)
            return sc->s[i].value;
    return 0;
}

static int has(const scrape *sc, const char *key)
{
    for (size_t i = 0; i < sc->n; i++)
        if (strcmp(sc->s[i].key, key) == 0)
            return 1;
    return 0;
}

#define DELTA(a, b, key) ((long long)(val(b, key) - val(a, key)))
#define EXPECT_DELTA(a, b, key, want)                                                              \
    cr_assert_eq(DELTA(a, b, key), (long long)(want), "%s moved by %lld, expected %lld", key,      \
                 DELTA(a, b, key), (long long)(want))

#define REQ(route, status) "coupon_http_requests_total{route=\"" route "\",status=\"" status "\"}"
#define CLAIMS(result) "coupon_claims_total{result=\"" result "\"}"
#define LOCK_ERR(kind) "coupon_lock_errors_total{kind=\"" kind "\"}"
#define WAIT_COUNT "coupon_lock_wait_seconds_count"
#define WAIT_INF "coupon_lock_wait_seconds_bucket{le=\"+Inf\"}"
#define STAGE_N(stage) "coupon_claim_stage_observations_total{stage=\"" stage "\"}"
#define STAGE_S(stage) "coupon_claim_stage_seconds_total{stage=\"" stage "\"}"

Test(app_health_metrics, metric_families_present, .timeout = 30)
{
    APP_SETUP_OK();
    start_all(1);
    scrape sc;
    do_scrape(&sc);
    const char *types[] = {
        "# TYPE coupon_http_requests_total counter",
        "# TYPE coupon_claims_total counter",
        "# TYPE coupon_sold_out_total counter",
        "# TYPE coupon_lock_acquisitions_total counter",
        "# TYPE coupon_lock_wait_seconds histogram",
        "# TYPE coupon_lock_retries_total counter",
        "# TYPE coupon_lock_errors_total counter",
        "# TYPE coupon_http_request_duration_seconds histogram",
        "# TYPE coupon_lock_nodes_up gauge",
        "# TYPE coupon_lock_quorum gauge",
        "# TYPE coupon_build_info gauge",
        "# TYPE process_start_time_seconds gauge",
        "# TYPE coupon_fence_heals_total counter",
        "# TYPE coupon_claim_stage_seconds_total counter",
        "# TYPE coupon_claim_stage_observations_total counter",
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        cr_assert_not_null(strstr(sc.text, types[i]), "missing '%s' in:\n%s", types[i], sc.text);
    cr_assert(has(&sc, WAIT_COUNT) && has(&sc, WAIT_INF) &&
                  has(&sc, "coupon_lock_wait_seconds_sum"),
              "histogram series missing:\n%s", sc.text);
    cr_assert(has(&sc, "coupon_lock_acquisitions_total") && has(&sc, "coupon_lock_retries_total"));
    cr_assert_eq(val(&sc, WAIT_COUNT), 0);
    scrape_free(&sc);
}

static void claim_expect(long long id, const char *user, long status, long long code)
{
    app_claim_expect(&g_app.srv[0], "POST", id, user, status, code, 0);
}

/* Histogram buckets are cumulative and end in +Inf == _count. */
static void check_histogram(const scrape *sc)
{
    double prev = 0;
    int buckets = 0;
    for (size_t i = 0; i < sc->n; i++) {
        if (strncmp(sc->s[i].key, "coupon_lock_wait_seconds_bucket{", 32) != 0)
            continue;
        cr_assert_geq(sc->s[i].value, prev, "bucket %s not cumulative", sc->s[i].key);
        prev = sc->s[i].value;
        buckets++;
    }
    cr_assert_geq(buckets, 2);
    cr_assert_eq(val(sc, WAIT_INF), val(sc, WAIT_COUNT));
}

Test(app_health_metrics, counters_move_exactly, .timeout = 30)
{
    APP_SETUP_OK();
    /* --work-us 1: a business step, so the section has its read, work and
     * commit stages apart (with none the store may run it as one). */
    app_env_up(&g_app, 1, 0, 1, "--lock-wait", "200", "--work-us", "1", NULL);
    scrape a, b, c, d;
    do_scrape(&a);

    long long id = app_create_coupon(&g_app.srv[0], "metered", 3, 1);
    claim_expect(id, "u1", 200, 0);
    claim_expect(id, "u2", 200, 0);
    claim_expect(id, "u1", 409, 1004); /* under the lock */
    claim_expect(id, "u3", 200, 0);    /* stock now 0 */
    claim_expect(id, "u4", 409, 1003); /* fast path, no lock */
    claim_expect(id, "u5", 409, 1003);
    http_reply r;
    app_request(&g_app.srv[0], "POST", "/api/v1/coupon/add?coupon_id=abc&user_id=u", NULL, NULL,
                &r);
    json_decref(app_expect(&r, 400, 1001));
    http_reply_free(&r);
    app_request(&g_app.srv[0], "GET", "/no/such/route", NULL, NULL, &r);
    json_decref(app_expect(&r, 404, 1008));
    http_reply_free(&r);

    do_scrape(&b);
    EXPECT_DELTA(&a, &b, REQ("/api/v1/coupon/add", "200"), 3);
    EXPECT_DELTA(&a, &b, REQ("/api/v1/coupon/add", "409"), 3);
    EXPECT_DELTA(&a, &b, REQ("/api/v1/coupon/add", "400"), 1);
    /* One latency observation per answered request of the route. */
    EXPECT_DELTA(&a, &b, "coupon_http_request_duration_seconds_count{route=\"/api/v1/coupon/add\"}", 7);
    EXPECT_DELTA(&a, &b, REQ("/api/v1/admin/coupon", "201"), 1);
    EXPECT_DELTA(&a, &b, REQ("unmatched", "404"), 1);
    /* The first scrape is counted once it was answered. */
    EXPECT_DELTA(&a, &b, REQ("/metrics", "200"), 1);
    EXPECT_DELTA(&a, &b, CLAIMS("ok"), 3);
    EXPECT_DELTA(&a, &b, CLAIMS("user_limit"), 1);
    EXPECT_DELTA(&a, &b, CLAIMS("sold_out"), 2);
    EXPECT_DELTA(&a, &b, "coupon_sold_out_total{path=\"fast\"}", 2);
    EXPECT_DELTA(&a, &b, "coupon_sold_out_total{path=\"locked\"}", 0);
    EXPECT_DELTA(&a, &b, "coupon_lock_acquisitions_total", 4);
    EXPECT_DELTA(&a, &b, WAIT_COUNT, 4);
    EXPECT_DELTA(&a, &b, "coupon_lock_retries_total", 0);
    EXPECT_DELTA(&a, &b, LOCK_ERR("timeout"), 0);
    EXPECT_DELTA(&a, &b, LOCK_ERR("unavailable"), 0);
    cr_assert_geq(val(&b, "coupon_lock_wait_seconds_sum"), val(&a, "coupon_lock_wait_seconds_sum"));
    check_histogram(&b);
    /* The claim's stages: the 4 claims past the fast path, one at a time
     * (so each its own leader, lock and section); the fast path and the bad
     * request reach none. */
    const char *per_claim[] = {"http_in", "claim_queue", "local_queue", "lock", "read", "release", "resume", "reply"};
    for (size_t i = 0; i < sizeof per_claim / sizeof per_claim[0]; i++) {
        char key[128];
        snprintf(key, sizeof key, STAGE_N("%s"), per_claim[i]);
        EXPECT_DELTA(&a, &b, key, 4);
    }
    /* The user-limit claim is decided by the read: no business step, no write. */
    EXPECT_DELTA(&a, &b, STAGE_N("work"), 3);
    EXPECT_DELTA(&a, &b, STAGE_N("commit"), 3);
    cr_assert_gt(val(&b, STAGE_S("lock")), val(&a, STAGE_S("lock")), "no time counted for the lock rounds");
    cr_assert_gt(val(&b, STAGE_S("commit")), val(&a, STAGE_S("commit")), "no time counted for the commits");

    /* A lock someone else holds: 1005 after retries within the 200 ms wait. */
    long long id2 = app_create_coupon(&g_app.srv[0], "held", 3, 1);
    char key[64], out[64];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, id2);
    const char *set[] = {"SET", key, "someone-else", "PX", "60000"};
    app_redis(&g_app.redis[0], out, sizeof out, 5, set);
    claim_expect(id2, "u1", 503, 1005);
    do_scrape(&c);
    EXPECT_DELTA(&b, &c, REQ("/api/v1/coupon/add", "503"), 1);
    EXPECT_DELTA(&b, &c, CLAIMS("lock_timeout"), 1);
    EXPECT_DELTA(&b, &c, LOCK_ERR("timeout"), 1);
    EXPECT_DELTA(&b, &c, "coupon_lock_acquisitions_total", 0);
    EXPECT_DELTA(&b, &c, WAIT_COUNT, 1);
    cr_assert_geq(DELTA(&b, &c, "coupon_lock_retries_total"), 1,
                  "a 200 ms wait on a held lock retried %lld times",
                  DELTA(&b, &c, "coupon_lock_retries_total"));
    /* The observed wait is at least most of the 200 ms. */
    cr_assert_geq(val(&c, "coupon_lock_wait_seconds_sum") - val(&b, "coupon_lock_wait_seconds_sum"),
                  0.1);

    /* Redis gone: 1006 and one unavailable error. */
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    claim_expect(id, "u9", 409, 1003); /* sold out still answers without Redis */
    long long id3 = app_create_coupon(&g_app.srv[0], "down", 3, 1);
    claim_expect(id3, "u1", 503, 1006);
    do_scrape(&d);
    EXPECT_DELTA(&c, &d, REQ("/api/v1/coupon/add", "503"), 1);
    EXPECT_DELTA(&c, &d, REQ("/api/v1/coupon/add", "409"), 1);
    EXPECT_DELTA(&c, &d, CLAIMS("lock_unavailable"), 1);
    EXPECT_DELTA(&c, &d, LOCK_ERR("unavailable"), 1);
    EXPECT_DELTA(&c, &d, "coupon_lock_acquisitions_total", 0);
    EXPECT_DELTA(&c, &d, WAIT_COUNT, 1);
    check_histogram(&d);

    scrape_free(&a);
    scrape_free(&b);
    scrape_free(&c);
    scrape_free(&d);
}

/* --redis as people write it: redis://:password@host:port against a Redis
 * with requirepass. The lock works with the URL's password, and what the
 * server tells the world about a node that is down (/healthz) names it
 * with the password as ***. */
Test(app_health_metrics, redis_url_with_password, .timeout = 30)
{
    char url[160];
    http_reply r;

    APP_SETUP_OK();
    memset(&g_app.redis[0], 0, sizeof g_app.redis[0]);
    snprintf(g_app.redis[0].password, sizeof g_app.redis[0].password, "hm-s3cret");
    cr_assert_eq(redis_start(&g_app.redis[0]), 0);
    g_app.nredis = 1;
    snprintf(url, sizeof url, "redis://:hm-s3cret@localhost:%d", g_app.redis[0].port);
    app_server_up(&g_app.srv[0], "--db", g_app.db, "--redis", url, "--admin-token", APP_TOKEN,
                  "--lock-wait", "200", NULL);
    expect_health(200, "ok", "ok", 1, 1);
    long long id = app_create_coupon(&g_app.srv[0], "url", 3, 1);
    app_claim_expect(&g_app.srv[0], "POST", id, "u1", 200, 0, 0);

    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    /* The prober notices within about its interval (polled, at most 5 s). */
    int64_t until = test_now_ms() + 5000;
    for (;;) {
        app_request(&g_app.srv[0], "GET", "/healthz", NULL, NULL, &r);
        if (r.status == 503 || test_now_ms() >= until)
            break;
        http_reply_free(&r);
        test_sleep_ms(50);
    }
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert(strstr(r.body, "hm-s3cret") == NULL, "password in /healthz: %s", r.body);
    cr_assert(strstr(r.body, "redis://:***@localhost:") != NULL, "%s", r.body);
    http_reply_free(&r);
}
