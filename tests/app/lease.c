/* lease.c - the lease outlived, end to end: two coupon-servers on one store
 * (a SQLite file: app_lease; a PostgreSQL database: app_lease_pg) and 3
 * Redis masters. A holder stalls inside the critical section (after its
 * read) longer than its lock's TTL, so that the other server gets the lock
 * and reads the same stock.
 *
 *   --fence off    both writes land: OVERSOLD (the lock alone cannot help
 *                  once the lease is gone);
 *   --fence write  the stale holder writes before the new holder does:
 *                  both accepted, OVERSOLD (write-only fencing is not enough
 *                  for a read-modify-write);
 *   --fence full   the new holder's read registered its fence, the stale
 *                  write is refused (503 / 1010), nothing of it applied.
 *
 * The stall is first the server's own fault injection (--fault-pause-ms,
 * timed so the order is A.read, B.read, A.write, B.write), then a real
 * SIGSTOP / SIGCONT of the holder's process. The off/write cases are the
 * guard against the section ever becoming atomic again: they must oversell. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "lease.db", .pg = APP_PG, .nredis = 3};
/* app_lease, or app_lease_pg on PostgreSQL (app_store.h). */
#define LEASE_SUITE APP_SUITE(app_lease)
TestSuite(LEASE_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 60);

/* Both servers with the given fence mode and TTL, each with its own two
 * extra options (name, value pairs), and the coupon (stock 5) they claim. */
static long long servers_up(const char *fence, const char *ttl, const char *const extra[2][4])
{
    for (size_t i = 0; i < 2; i++)
        app_env_server_up(&g_app, i, "--fence", fence, "--lock-ttl", ttl, "--lock-batch", "1",
                          "--lock-wait", "5000", extra[i][0], extra[i][1], extra[i][2],
                          extra[i][3], NULL);
    return app_create_coupon(&g_app.srv[0], "lease", 5, 0);
}

typedef struct async_claim {
    const server_proc *srv;
    long long coupon_id;
    const char *user;
    int delay_ms;   /* sent this long after the thread starts */
    long status;    /* out: HTTP status (0: transport error) */
    long long code; /* out: the envelope's code */
    pthread_t th;
} async_claim;

static void *claim_thread(void *arg)
{
    async_claim *c = arg;
    char url[256];
    app_body body;
    CURL *h = curl_easy_init();

    if (h == NULL)
        return NULL;
    test_sleep_ms(c->delay_ms);
    snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=%s", c->srv->url, c->coupon_id,
             c->user);
    if (app_curl_post(h, url, &body, 2000, &c->status) == CURLE_OK) {
        json_t *root = NULL;
        c->code = app_body_code(&body, &root);
        json_decref(root);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static void claim_start(async_claim *c, const server_proc *srv, long long id, const char *user, int delay_ms)
{
    memset(c, 0, sizeof *c);
    c->srv = srv;
    c->coupon_id = id;
    c->user = user;
    c->delay_ms = delay_ms;
    c->code = -1;
    cr_assert_eq(pthread_create(&c->th, NULL, claim_thread, c), 0);
}

static void claim_join(async_claim *c)
{
    cr_assert_eq(pthread_join(c->th, NULL), 0);
}

/* What the interleaving must end with, read from the store. */
static void expect_outcome(const char *fence, long long id, const async_claim *a, const async_claim *b)
{
    app_coupon_state st;
    app_db_state(g_app.db, id, &st);
    long long a_rows = app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id='a'");
    cr_log_info("--fence %s: stale holder %ld/%lld, new holder %ld/%lld; records %lld, stock %lld of %lld", fence,
                a->status, a->code, b->status, b->code, st.records, st.stock, st.total);
    cr_assert_eq(b->status, 200, "the new holder: %ld / %lld", b->status, b->code);
    if (strcmp(fence, "full") == 0) {
        cr_assert_eq(a->status, 503, "the stale holder must be refused: %ld / %lld", a->status, a->code);
        cr_assert_eq(a->code, 1010);
        cr_assert_eq(a_rows, 0, "the refused claim left a record");
        cr_assert_eq(st.records, 1);
        cr_assert_eq(st.stock, st.total - 1, "stock %lld", st.stock);
    } else {
        /* Both writes landed, each `5 - 1` from the same read. */
        cr_assert_eq(a->status, 200, "--fence %s: %ld / %lld", fence, a->status, a->code);
        cr_assert_eq(a_rows, 1);
        cr_assert_eq(st.records, 2);
        cr_assert_eq(st.stock, st.total - 1, "stock %lld: the lost update", st.stock);
        cr_assert_neq(st.stock + st.records, st.total, "OVERSOLD must show");
    }
}

/* A stalls 1000 ms after its read, B 1500 ms; TTL 200 ms. A claims at 0 and
 * reads at once; its lease ends at ~200; B claims at 500 and reads; A writes
 * at ~1000; B writes at ~2000. */
static void paused_interleaving(const char *fence)
{
    APP_SETUP_OK();
    async_claim a, b;
    const char *const extra[2][4] = {{"--fault-pause-ms", "1000", "--threads", "2"},
                                     {"--fault-pause-ms", "1500", "--threads", "2"}};
    long long id = servers_up(fence, "200", extra);

    claim_start(&a, &g_app.srv[0], id, "a", 0);
    claim_start(&b, &g_app.srv[1], id, "b", 500);
    claim_join(&a);
    claim_join(&b);
    expect_outcome(fence, id, &a, &b);
}

Test(LEASE_SUITE, pause_past_ttl_fence_off_oversells) { paused_interleaving("off"); }
Test(LEASE_SUITE, pause_past_ttl_fence_write_oversells) { paused_interleaving("write"); }
Test(LEASE_SUITE, pause_past_ttl_fence_full_refuses_the_stale_write) { paused_interleaving("full"); }

/* A real SIGSTOP of the holder's process: A reads and starts its 300 ms
 * business step, is stopped at 100 ms for about a second (its 500 ms lease
 * runs out), B claims at 800 and completes; then A is continued and writes. */
static void sigstopped_holder(const char *fence)
{
    APP_SETUP_OK();
    async_claim a, b;
    const char *const extra[2][4] = {{"--work-us", "300000", "--threads", "2"},
                                     {"--work-us", "300000", "--threads", "2"}};
    long long id = servers_up(fence, "500", extra);

    int64_t t0 = test_now_ms();
    claim_start(&a, &g_app.srv[0], id, "a", 0);
    test_sleep_ms(100);
    cr_assert_eq(server_pause(&g_app.srv[0]), 0);
    int64_t wait = 800 - (test_now_ms() - t0);
    claim_start(&b, &g_app.srv[1], id, "b", wait > 0 ? (int)wait : 0);
    claim_join(&b);
    cr_assert_eq(server_resume(&g_app.srv[0]), 0);
    claim_join(&a);
    expect_outcome(fence, id, &a, &b);
}

Test(LEASE_SUITE, sigstop_past_ttl_fence_off_oversells) { sigstopped_holder("off"); }
Test(LEASE_SUITE, sigstop_past_ttl_fence_full_refuses_the_stale_write) { sigstopped_holder("full"); }

/* --fault-pause-ms MS:signal (scripts/hosts holds a server inside a lease
 * with it): no stall until a SIGUSR1, then exactly one claim stalls MS, and
 * the server lives on (SIGUSR1 would otherwise end it). */
static int64_t timed_claim(long long id, const char *user)
{
    int64_t t0 = test_now_ms();
    app_claim_expect(&g_app.srv[0], "POST", id, user, 200, 0, 0);
    return test_now_ms() - t0;
}

Test(LEASE_SUITE, signal_armed_pause_stalls_one_claim_per_sigusr1)
{
    APP_SETUP_OK();
    /* A 2 s stall against a 1.5 s bound on the others: a loaded machine
     * slows a claim, it does not make it stall or skip a stall. */
    app_env_server_up(&g_app, 0, "--fault-pause-ms", "2000:signal", "--lock-ttl", "10000", "--threads", "2", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "armed", 20, 0);
    char user[16];
    int claims = 0;

    (void)timed_claim(id, "warm"); /* the first claim also opens the connections */
    claims++;
    for (int i = 0; i < 3; i++, claims++) {
        snprintf(user, sizeof user, "u%d", claims);
        int64_t ms = timed_claim(id, user);
        cr_assert_lt(ms, 1500, "a claim stalled before any SIGUSR1: %lld ms", (long long)ms);
    }
    cr_assert_eq(kill(g_app.srv[0].pid, SIGUSR1), 0);
    /* The handler runs when the server's main thread is next scheduled: a
     * claim sent right after kill() may run first, so the stall is the
     * first one of the next few (bounded), and then none. */
    int stalled_at = -1;
    for (int i = 0; i < 10 && stalled_at < 0; i++, claims++) {
        snprintf(user, sizeof user, "u%d", claims);
        int64_t ms = timed_claim(id, user);
        if (ms >= 2000)
            stalled_at = i;
        else
            test_sleep_ms(50);
    }
    cr_assert_geq(stalled_at, 0, "no claim stalled after SIGUSR1");
    for (int i = 0; i < 3; i++, claims++) {
        snprintf(user, sizeof user, "u%d", claims);
        int64_t ms = timed_claim(id, user);
        cr_assert_lt(ms, 1500, "the stall fired twice for one SIGUSR1: %lld ms", (long long)ms);
    }
    app_coupon_state st;
    app_expect_db(g_app.db, id, 20 - claims, claims, &st);
}
