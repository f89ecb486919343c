/* outcomes.c - every claim reaches the client and coupon_claims_total as its
 * row of the outcome table (app/src/outcome.h) says:
 *   - a claim refused for its parameters (400 / 1001) is counted as
 *     result="invalid" (it was answered by hand, and never counted);
 *   - with the lock service's quorum lost (2 of 3 nodes killed, or
 *     SIGSTOPped), every claim of a burst is told 1006 "lock service
 *     unavailable", also those whose wait ended queued behind other claims
 *     (89 of 100 were told 1005 "lock not acquired in time");
 *   - with every node up and the lock held by another owner, 1005.
 * Real processes: 3 redis-servers, one coupon-server per test. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "outcomes.db", .flags = APP_ENV_CURL, .nredis = 3, .nservers = 0};
TestSuite(app_outcomes, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

/* The burst: more claims than claim workers (32 by default) and all of one
 * coupon. So most of them wait behind another claim's acquisition (the
 * local queue) or for a worker (the claim queue), not in one of their own.
 * Those are the waits whose end must be reported right. */
#define N_BURST 100
#define LOCK_WAIT "1000"

static long long metric_claims(const server_proc *s, const char *result)
{
    char name[96];
    snprintf(name, sizeof name, "coupon_claims_total{result=\"%s\"}", result);
    return app_metric(s, name);
}

Test(app_outcomes, invalid_claims_are_counted)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    const server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "c", 10, 1);
    char path[160];
    /* Each bad parameter once, on both methods; the msg names the parameter. */
    struct {
        const char *method;
        const char *query;
        const char *names;
    } bad[] = {
        {"POST", "user_id=u1", "coupon_id"},
        {"GET", "coupon_id=0&user_id=u1", "coupon_id"},
        {"POST", "coupon_id=abc&user_id=u1", "coupon_id"},
        {"POST", "coupon_id=1", "user_id"},
        {"GET", "coupon_id=1&user_id=has%20space", "user_id"},
    };
    size_t n_bad = sizeof bad / sizeof bad[0];

    cr_assert_eq(metric_claims(s, "invalid"), 0);
    for (size_t i = 0; i < n_bad; i++) {
        http_reply r;
        snprintf(path, sizeof path, "/api/v1/coupon/add?%s", bad[i].query);
        app_request(s, bad[i].method, path, NULL, NULL, &r);
        json_t *root = app_expect(&r, 400, 1001);
        const char *msg = app_jstr(root, "msg");
        cr_assert(strstr(msg, bad[i].names) != NULL, "%s %s: msg '%s' does not name %s", bad[i].method, path, msg,
                  bad[i].names);
        json_decref(root);
        http_reply_free(&r);
    }
    cr_assert_eq(metric_claims(s, "invalid"), (long long)n_bad, "coupon_claims_total{result=\"invalid\"} is %lld",
                 metric_claims(s, "invalid"));
    /* A good claim is counted as ok, and nothing else moved. */
    app_claim_expect(s, "POST", id, "u1", 200, 0, 0);
    cr_assert_eq(metric_claims(s, "ok"), 1);
    cr_assert_eq(metric_claims(s, "invalid"), (long long)n_bad);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 9, 1, &st);
}

typedef struct burst_call {
    const server_proc *srv;
    long long coupon_id;
    int idx;
    long status;
    long long code;
    int has_retry_after;
} burst_call;

static void *burst_main(void *arg)
{
    burst_call *c = arg;
    char url[256];
    http_reply r;

    snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=b%d", c->srv->url, c->coupon_id, c->idx);
    c->status = 0;
    c->code = -1;
    if (http_request("POST", url, NULL, NULL, &r) != 0)
        return NULL;
    c->status = r.status;
    c->has_retry_after = r.retry_after[0] != '\0';
    json_t *root = r.body != NULL ? json_loads(r.body, 0, NULL) : NULL;
    json_t *code = json_object_get(root, "code");
    if (json_is_integer(code))
        c->code = json_integer_value(code);
    json_decref(root);
    http_reply_free(&r);
    return NULL;
}

/* The sum of coupon_claims_total over the NULL-terminated labels. */
static long long metric_claims_sum(const server_proc *s, const char *const *labels)
{
    long long sum = 0;
    for (; *labels != NULL; labels++)
        sum += metric_claims(s, *labels);
    return sum;
}

/* N_BURST claims of coupon id at once, each on its own thread; asserts
 * every one was answered want_status / want_code with Retry-After, and
 * that coupon_claims_total counted them all under the NULL-terminated
 * labels (the rows that answer that code). */
static void burst_expect(const server_proc *s, long long id, long want_status, long long want_code,
                         const char *const *labels)
{
    static burst_call calls[N_BURST];
    static pthread_t th[N_BURST];
    long long before = metric_claims_sum(s, labels);
    size_t right = 0;
    long long n1005 = 0, n1006 = 0;

    for (size_t i = 0; i < N_BURST; i++) {
        calls[i] = (burst_call){.srv = s, .coupon_id = id, .idx = (int)i};
        cr_assert_eq(pthread_create(&th[i], NULL, burst_main, &calls[i]), 0, "cannot start claim thread %zu", i);
    }
    for (size_t i = 0; i < N_BURST; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (size_t i = 0; i < N_BURST; i++) {
        n1005 += calls[i].code == 1005;
        n1006 += calls[i].code == 1006;
        if (calls[i].status == want_status && calls[i].code == want_code && calls[i].has_retry_after)
            right++;
    }
    cr_assert_eq(right, N_BURST, "%zu of %d claims answered %ld / %lld with Retry-After (1005: %lld, 1006: %lld)",
                 right, N_BURST, want_status, want_code, n1005, n1006);
    long long grew = metric_claims_sum(s, labels) - before;
    cr_assert_eq(grew, N_BURST, "coupon_claims_total{result=\"%s\"...} grew by %lld", labels[0], grew);
}

/* The rows a burst lands on: the lock service down (the claims that
 * acquired and those whose wait ended first alike), or contention (held
 * until the wait ended, in the local queue or in the claim queue). */
static const char *const UNAVAILABLE_ROWS[] = {"lock_unavailable", NULL};
static const char *const CONTENTION_ROWS[] = {"lock_timeout", "queue_timeout", NULL};

/* Not one claim of the burst was applied. */
static void expect_untouched(long long id)
{
    app_coupon_state st;
    app_expect_db(g_app.db, id, 1000, 0, &st);
}

/* A server and a coupon made while every node is up. redis_timeout_ms: a
 * round's bound on a node (the server's default, 200 ms, where nodes are
 * stopped; generous where they are up, so that a loaded machine cannot
 * turn contention into a timed-out round). */
static long long up_with_coupon(const char *redis_timeout_ms)
{
    /* The burst is N_BURST claims at once from one address: above the
     * per-address cap, which is for many clients, not for this one. */
    app_env_server_up(&g_app, 0, "--lock-wait", LOCK_WAIT, "--redis-timeout-ms", redis_timeout_ms,
                      "--max-connections-per-ip", "0", NULL);
    return app_create_coupon(&g_app.srv[0], "burst", 1000, 0);
}

Test(app_outcomes, quorum_lost_killed_answers_1006)
{
    APP_SETUP_OK();
    long long id = up_with_coupon("200");
    cr_assert_eq(redis_kill(&g_app.redis[1]), 0);
    cr_assert_eq(redis_kill(&g_app.redis[2]), 0);
    burst_expect(&g_app.srv[0], id, 503, 1006, UNAVAILABLE_ROWS);
    expect_untouched(id);
}

Test(app_outcomes, quorum_lost_stopped_answers_1006)
{
    APP_SETUP_OK();
    long long id = up_with_coupon("200");
    /* Stopped, not gone: connections are accepted and commands sent, and
     * only the command timeout ends each round (.fini resumes them). */
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);
    burst_expect(&g_app.srv[0], id, 503, 1006, UNAVAILABLE_ROWS);
    expect_untouched(id);
}

Test(app_outcomes, lock_held_by_another_answers_1005)
{
    APP_SETUP_OK();
    long long id = up_with_coupon("2000");
    char key[64], out[64];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, id);
    /* Another owner's key on every node, for longer than the test. */
    for (size_t i = 0; i < 3; i++) {
        const char *set[] = {"SET", key, "another-owner", "PX", "120000"};
        app_redis(&g_app.redis[i], out, sizeof out, 5, set);
        cr_assert_str_eq(out, "OK");
    }
    burst_expect(&g_app.srv[0], id, 503, 1005, CONTENTION_ROWS);
    cr_assert_eq(metric_claims(&g_app.srv[0], "lock_unavailable"), 0);
    expect_untouched(id);
}

/* The claim-queue path alone: one claim worker, held by a claim whose
 * round waits on the stopped nodes for a whole --redis-timeout-ms, longer
 * than --lock-wait. The claims queued behind it reach their deadline in
 * the claim queue and are answered there, without a round. They get 1006
 * as well, not 1005 "lock not acquired in time", since the lock service
 * had no quorum when their wait ended. */
Test(app_outcomes, queued_past_its_wait_without_quorum_answers_1006)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--threads", "2", "--claim-workers", "1", "--lock-wait", "300",
                      "--redis-timeout-ms", "1000", NULL);
    const server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "queued", 1000, 0);
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);
    long long unavailable_before = app_metric(s, "coupon_lock_errors_total{kind=\"unavailable\"}");

    enum { N = 4 };
    static burst_call calls[N];
    pthread_t th[N];
    /* The first alone, so that it is the one the worker runs. */
    for (size_t i = 0; i < N; i++) {
        calls[i] = (burst_call){.srv = s, .coupon_id = id, .idx = (int)i};
        cr_assert_eq(pthread_create(&th[i], NULL, burst_main, &calls[i]), 0);
        if (i == 0)
            test_sleep_ms(150);
    }
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (size_t i = 0; i < N; i++)
        cr_expect(calls[i].status == 503 && calls[i].code == 1006 && calls[i].has_retry_after,
                  "claim %zu: HTTP %ld code %lld, not 503 / 1006 with Retry-After", i, calls[i].status,
                  calls[i].code);
    /* Each counted once as the lock service unavailable. */
    cr_expect_eq(app_metric(s, "coupon_lock_errors_total{kind=\"unavailable\"}") - unavailable_before, N);
    cr_expect_eq(metric_claims(s, "queue_timeout"), 0);
    expect_untouched(id);
}
