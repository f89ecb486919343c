/* bundle_faults.c - bundles under the failures that break hand-written
 * multi-row locking, on real processes (two coupon-servers, one store, one
 * Redis):
 *
 *   deadlock   request-order, two clients listing the same coupons in
 *              opposite orders: each holds its first lock and waits for the
 *              other's; both end at --lock-wait with 1005, nothing issued
 *              twice; sorted and multi never deadlock on the same load;
 *   crash      a server killed (SIGKILL) after its locks and its read,
 *              before the commit; and one that _exits between its first
 *              and second lock (--fault-crash-after-lock 1): nothing
 *              issued, and the coupons sell again once the TTL frees them;
 *   stale      a holder stalls past its TTL inside the section; another
 *              server claims one of its coupons; --fence full refuses the
 *              stale bundle whole (1010: not even the untouched coupon is
 *              issued), --fence off writes it and oversells.
 * Built twice: on SQLite (app_bundle_faults) and PostgreSQL (app_bundle_faults_pg). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "bundle_faults.db", .pg = APP_PG, .flags = APP_ENV_CURL, .nredis = 1};
#define FAULTS_SUITE APP_SUITE(app_bundle_faults)
TestSuite(FAULTS_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 90);

typedef struct async_bundle {
    const server_proc *srv;
    char ids[64];
    char user[32];
    pthread_barrier_t *start; /* NULL: go at once */
    long status;              /* out: HTTP status, 0 on a transport error */
    long long code;           /* out: the envelope's code, -1 when none */
    int64_t ms;               /* out: how long the answer took */
    pthread_t th;
} async_bundle;

static void *bundle_thread(void *arg)
{
    async_bundle *b = arg;
    char url[256];
    app_body body;
    CURL *h = curl_easy_init();

    if (b->start != NULL)
        pthread_barrier_wait(b->start);
    if (h == NULL)
        return NULL;
    snprintf(url, sizeof url, "%s/api/v1/coupon/bundle?user_id=%s&coupon_ids=%s", b->srv->url, b->user, b->ids);
    int64_t t0 = test_now_ms();
    if (app_curl_post(h, url, &body, 2000, &b->status) == CURLE_OK) {
        json_t *root = NULL;
        b->code = app_body_code(&body, &root);
        json_decref(root);
    }
    b->ms = test_now_ms() - t0;
    curl_easy_cleanup(h);
    return NULL;
}

static void bundle_start(async_bundle *b, const server_proc *srv, const char *user, pthread_barrier_t *start,
                         const char *ids_fmt, long long x, long long y)
{
    memset(b, 0, sizeof *b);
    b->srv = srv;
    b->start = start;
    b->code = -1;
    snprintf(b->user, sizeof b->user, "%s", user);
    snprintf(b->ids, sizeof b->ids, ids_fmt, x, y);
    cr_assert_eq(pthread_create(&b->th, NULL, bundle_thread, b), 0);
}

static void bundle_join(async_bundle *b)
{
    cr_assert_eq(pthread_join(b->th, NULL), 0);
}

static long long user_records(const char *user)
{
    return app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id = '%s'", user);
}

/* stock + records == total for both coupons, and every user holds 0 or 2. */
static void expect_whole(long long a, long long b, long long issued_bundles)
{
    app_coupon_state sa, sb;
    app_expect_db(g_app.db, a, 100 - issued_bundles, issued_bundles, &sa);
    app_expect_db(g_app.db, b, 100 - issued_bundles, issued_bundles, &sb);
    cr_assert_eq(app_db_int(g_app.db,
                            "SELECT COUNT(*) FROM (SELECT user_id FROM coupon_record GROUP BY user_id "
                            "HAVING COUNT(*) <> 2) p"),
                 0, "a partial bundle in the store");
}

/* Two clients, one per server, send {a,b} and {b,a} at the same moment;
 * each server waits 300 ms between a bundle's first lock and its second
 * (--fault-bundle-gap-ms: a slow lock round), so under request-order both
 * hold their first coupon when they ask for the other's. Returns how many
 * of the rounds' answers were 1005. */
static int opposite_orders(const char *way, int rounds, long long *issued, int *rounds_deadlocked)
{
    app_env_server_up(&g_app, 0, "--bundle-lock", way, "--lock-wait", "1000", "--fault-bundle-gap-ms", "300", NULL);
    app_env_server_up(&g_app, 1, "--bundle-lock", way, "--lock-wait", "1000", "--fault-bundle-gap-ms", "300", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 100, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 100, 0);
    int refused = 0;

    *issued = 0;
    *rounds_deadlocked = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_t start;
        async_bundle x, y;
        char ux[16], uy[16];
        cr_assert_eq(pthread_barrier_init(&start, NULL, 2), 0);
        snprintf(ux, sizeof ux, "x%d", r);
        snprintf(uy, sizeof uy, "y%d", r);
        bundle_start(&x, &g_app.srv[0], ux, &start, "%lld,%lld", a, b);
        bundle_start(&y, &g_app.srv[1], uy, &start, "%lld,%lld", b, a);
        bundle_join(&x);
        bundle_join(&y);
        pthread_barrier_destroy(&start);
        const async_bundle *both[2] = {&x, &y};
        *rounds_deadlocked += x.code == 1005 || y.code == 1005;
        for (int i = 0; i < 2; i++) {
            const async_bundle *q = both[i];
            cr_assert((q->status == 200 && q->code == 0) || (q->status == 503 && q->code == 1005),
                      "%s round %d: %ld / %lld", way, r, q->status, q->code);
            /* Bounded by the lock wait (1 s), with room for a slow machine:
             * the deadlock never outlives it. */
            cr_assert_lt(q->ms, 6000, "%s round %d: answered after %lld ms", way, r, (long long)q->ms);
            /* A refusal waited its whole --lock-wait: the lower bound is
             * what a deadlock costs, whatever the machine's speed. */
            if (q->code == 1005)
                cr_assert_geq(q->ms, 900, "%s round %d: 1005 after only %lld ms", way, r, (long long)q->ms);
            refused += q->code == 1005;
            *issued += q->code == 0;
            cr_assert_eq(user_records(q->user), q->code == 0 ? 2 : 0, "%s: user %s", way, q->user);
        }
    }
    expect_whole(a, b, *issued);
    return refused;
}

Test(FAULTS_SUITE, request_order_deadlocks_until_the_lock_wait)
{
    APP_SETUP_OK();
    long long issued;
    int deadlocked;
    int refused = opposite_orders("request-order", 3, &issued, &deadlocked);
    cr_log_info("request-order: %d of 6 answers 1005, %lld bundles issued", refused, issued);
    /* Both hold their first coupon through the 300 ms gap, so each waits
     * for the other's until its --lock-wait ends: every round deadlocks.
     * The first to give up releases its coupon, and the other, if its own
     * wait has not ended yet (a few ms apart), takes it and succeeds. */
    cr_assert_eq(deadlocked, 3, "%d of 3 rounds deadlocked", deadlocked);
    cr_assert_geq(refused, 3);
}

Test(FAULTS_SUITE, sorted_takes_opposite_orders_without_deadlock)
{
    APP_SETUP_OK();
    long long issued;
    int deadlocked;
    int refused = opposite_orders("sorted", 3, &issued, &deadlocked);
    cr_assert_eq(refused, 0, "sorted refused %d bundles", refused);
    cr_assert_eq(issued, 6);
}

Test(FAULTS_SUITE, multi_takes_opposite_orders_without_deadlock)
{
    APP_SETUP_OK();
    long long issued;
    int deadlocked;
    int refused = opposite_orders("multi", 3, &issued, &deadlocked);
    cr_assert_eq(refused, 0, "multi refused %d bundles", refused);
    cr_assert_eq(issued, 6);
}

static void wait_fence_registered(long long id)
{
    for (int i = 0; i < 200; i++) {
        if (app_db_int(g_app.db, "SELECT last_fence FROM coupon WHERE id = %lld", id) > 0)
            return;
        test_sleep_ms(25);
    }
    cr_assert_fail("the bundle never read coupon %lld", id);
}

/* Killed with its locks taken and its rows read (their fences registered),
 * inside its business step: before the commit. */
static void crash_before_commit(const char *way)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--bundle-lock", way, "--lock-ttl", "1000", "--fault-pause-ms", "10000:1", NULL);
    app_env_server_up(&g_app, 1, "--bundle-lock", way, "--lock-ttl", "1000", "--lock-wait", "5000", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 100, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 100, 0);
    async_bundle x;

    bundle_start(&x, &g_app.srv[0], "doomed", NULL, "%lld,%lld", b, a);
    wait_fence_registered(a);
    wait_fence_registered(b);
    int code = 0;
    cr_assert_eq(server_stop(&g_app.srv[0], SIGKILL, &code), 0);
    bundle_join(&x);
    cr_assert_eq(x.status, 0, "the killed server answered %ld", x.status);
    expect_whole(a, b, 0);
    /* Its locks die with their TTL: the other server sells both coupons. */
    char ids[64];
    snprintf(ids, sizeof ids, "%lld,%lld", a, b);
    http_reply r;
    char path[160];
    snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=after&coupon_ids=%s", ids);
    app_request(&g_app.srv[1], "POST", path, NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
    expect_whole(a, b, 1);
    cr_assert_eq(user_records("doomed"), 0);
}

Test(FAULTS_SUITE, killed_before_the_commit_sorted_issues_nothing) { crash_before_commit("sorted"); }
Test(FAULTS_SUITE, killed_before_the_commit_multi_issues_nothing) { crash_before_commit("multi"); }

/* The crash fault right after the first lock of request-order, the second
 * not yet taken: one coupon's lock left behind, nothing read or written. */
Test(FAULTS_SUITE, crash_between_two_locks_issues_nothing)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--bundle-lock", "request-order", "--lock-ttl", "1000", "--fault-crash-after-lock",
                      "1", NULL);
    app_env_server_up(&g_app, 1, "--bundle-lock", "request-order", "--lock-ttl", "1000", "--lock-wait", "5000",
                      NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 100, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 100, 0);
    async_bundle x;
    bundle_start(&x, &g_app.srv[0], "doomed", NULL, "%lld,%lld", a, b);
    bundle_join(&x);
    cr_assert_eq(x.status, 0, "the crashed server answered %ld", x.status);
    int code = 0;
    cr_assert_eq(server_stop(&g_app.srv[0], SIGTERM, &code), 0);
    cr_assert_eq(code, 86, "exit %d, not the crash fault's", code);
    expect_whole(a, b, 0);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon WHERE last_fence > 0"), 0, "a row was read");
    /* a's lock is still there until its TTL: b first waits for it. */
    char path[160];
    http_reply r;
    snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=after&coupon_ids=%lld,%lld", b, a);
    app_request(&g_app.srv[1], "POST", path, NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
    expect_whole(a, b, 1);
}

/* Server 0's bundle {a,b} stalls 1.5 s after its read with a 300 ms TTL;
 * meanwhile server 1 claims b alone (it gets b's lock once the TTL ends). */
static void stale_bundle(const char *way, const char *fence)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--bundle-lock", way, "--fence", fence, "--lock-ttl", "300", "--lock-batch", "1",
                      "--fault-pause-ms", "1500:1", NULL);
    app_env_server_up(&g_app, 1, "--bundle-lock", way, "--fence", fence, "--lock-ttl", "300", "--lock-batch", "1",
                      "--lock-wait", "5000", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 100, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 100, 0);
    char key[64], out[64];
    async_bundle x;

    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, b);
    bundle_start(&x, &g_app.srv[0], "stale", NULL, "%lld,%lld", a, b);
    /* The bundle holds b's lock (it reads right after taking it). */
    const char *exists[] = {"EXISTS", key};
    for (int i = 0; i < 200; i++) {
        app_redis(&g_app.redis[0], out, sizeof out, 2, exists);
        if (strcmp(out, "1") == 0)
            break;
        test_sleep_ms(10);
    }
    cr_assert_str_eq(out, "1", "the bundle never took b's lock");
    test_sleep_ms(50);
    app_claim_expect(&g_app.srv[1], "POST", b, "newer", 200, 0, 0);
    bundle_join(&x);
    app_coupon_state sa, sb;
    app_db_state(g_app.db, a, &sa);
    app_db_state(g_app.db, b, &sb);
    cr_log_info("%s --fence %s: stale bundle %ld / %lld; a %lld records stock %lld, b %lld records stock %lld", way,
                fence, x.status, x.code, sa.records, sa.stock, sb.records, sb.stock);
    if (strcmp(fence, "full") == 0) {
        cr_assert(x.status == 503 && x.code == 1010, "stale bundle answered %ld / %lld", x.status, x.code);
        /* Refused whole: not even a, which nobody newer touched. */
        cr_assert_eq(user_records("stale"), 0);
        app_expect_db(g_app.db, a, 100, 0, &sa);
        app_expect_db(g_app.db, b, 99, 1, &sb);
    } else {
        /* The lost update: both writes land on b from the same read. */
        cr_assert(x.status == 200 && x.code == 0, "stale bundle answered %ld / %lld", x.status, x.code);
        cr_assert_eq(sb.records, 2);
        cr_assert_eq(sb.stock, 99, "b: two records, one unit of stock gone: oversold by 1");
        cr_assert_eq(sa.records, 1);
    }
}

Test(FAULTS_SUITE, sorted_stale_bundle_fence_full_is_refused_whole) { stale_bundle("sorted", "full"); }
Test(FAULTS_SUITE, multi_stale_bundle_fence_full_is_refused_whole) { stale_bundle("multi", "full"); }
Test(FAULTS_SUITE, sorted_stale_bundle_fence_off_oversells) { stale_bundle("sorted", "off"); }
Test(FAULTS_SUITE, multi_stale_bundle_fence_off_oversells) { stale_bundle("multi", "off"); }

/* sorted's own hazard: the first coupon's lease ends while the bundle is
 * still taking the last lock (--fault-bundle-gap-ms 800 against a 300 ms
 * TTL). Another server claims a meanwhile, reading it with a newer fence;
 * the bundle's fenced read of a is then refused: 1010, nothing of it
 * issued, and a's one record is the other server's. */
Test(FAULTS_SUITE, sorted_lease_ends_while_taking_the_last_lock)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--bundle-lock", "sorted", "--lock-ttl", "300", "--lock-wait", "5000",
                      "--fault-bundle-gap-ms", "800", NULL);
    app_env_server_up(&g_app, 1, "--lock-ttl", "300", "--lock-wait", "5000", "--lock-batch", "1", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 100, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 100, 0);
    char key[64], out[64];
    async_bundle x;

    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, a);
    bundle_start(&x, &g_app.srv[0], "slow", NULL, "%lld,%lld", b, a);
    const char *exists[] = {"EXISTS", key};
    for (int i = 0; i < 200; i++) {
        app_redis(&g_app.redis[0], out, sizeof out, 2, exists);
        if (strcmp(out, "1") == 0)
            break;
        test_sleep_ms(10);
    }
    cr_assert_str_eq(out, "1", "the bundle never took a's lock");
    /* Server 1's claim waits for a's lease to end (300 ms), then runs
     * while the bundle still sits in its 800 ms gap. */
    app_claim_expect(&g_app.srv[1], "POST", a, "other", 200, 0, 0);
    bundle_join(&x);
    cr_assert(x.status == 503 && x.code == 1010, "the bundle answered %ld / %lld", x.status, x.code);
    cr_assert_eq(user_records("slow"), 0);
    app_coupon_state st;
    app_expect_db(g_app.db, a, 99, 1, &st);
    app_expect_db(g_app.db, b, 100, 0, &st);
}
