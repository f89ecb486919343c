/* round.c - several coupons in one lock round (app/src/claim/claimq.c,
 * lead_round; strategy_redlock.c, redlock_claim_each):
 *   - the claims of 15 coupons that queued behind a stalled section are
 *     served by one acquire round and one release round on the master;
 *   - a coupon held elsewhere is not answered by the round: its claim goes
 *     back to its lane and gets the lock once the holder's key is gone,
 *     while the other coupons of the round are answered at once;
 *   - a worker waiting alone for a coupon held elsewhere still serves a
 *     coupon whose claim comes during that wait.
 * Each test runs one coupon-server with one claim worker, so every lane
 * belongs to the stalled worker, and stalls it with --fault-pause-ms
 * MS:signal. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "round.db", .flags = APP_ENV_CURL, .nredis = 1};
TestSuite(app_round, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

#define OTHERS 15

/* One claim on its own thread and handle: its answer and when it came. */
typedef struct claim_run {
    pthread_t th;
    long long coupon;
    char user[32];
    long status;
    long long code;
    int64_t done_ms;
    char body[256];
} claim_run;

static void *claim_main(void *arg)
{
    claim_run *c = arg;
    char url[256];
    app_body b;
    json_t *root = NULL;
    CURL *h = curl_easy_init();

    c->code = -1;
    if (h != NULL) {
        snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=%s", g_app.srv[0].url, c->coupon,
                 c->user);
        if (app_curl_post(h, url, &b, 5000L, &c->status) == CURLE_OK)
            c->code = app_body_code(&b, &root);
        snprintf(c->body, sizeof c->body, "%.200s", b.data);
        json_decref(root);
        curl_easy_cleanup(h);
    }
    c->done_ms = test_now_ms();
    return NULL;
}

static void claim_start(claim_run *c, long long coupon, const char *user)
{
    c->coupon = coupon;
    snprintf(c->user, sizeof c->user, "%s", user);
    cr_assert_eq(pthread_create(&c->th, NULL, claim_main, c), 0);
}

static void claim_expect(claim_run *c, long status, long long code)
{
    cr_assert_eq(pthread_join(c->th, NULL), 0);
    cr_assert(c->status == status && c->code == code, "coupon %lld, user %s: want HTTP %ld code %lld, got %s",
              c->coupon, c->user, status, code, c->body);
}

/* Arms the stall and starts the claim that takes it on coupon `stalled`:
 * the signal is handled when the server's main thread next runs, so the
 * claim is sent a little later. Returns once that claim is inside its
 * section (the lanes of the only claim worker then queue up). */
static void stall_on(claim_run *c, long long stalled)
{
    cr_assert_eq(kill(g_app.srv[0].pid, SIGUSR1), 0);
    test_sleep_ms(200);
    claim_start(c, stalled, "stalled");
    test_sleep_ms(300);
}

/* Up to 5 s for n claims to wait in the claim queue. */
static void wait_queued(long long n)
{
    long long waiting = 0;
    for (int i = 0; i < 100 && (waiting = app_metric(&g_app.srv[0], "coupon_claims_waiting")) < n; i++)
        test_sleep_ms(50);
    cr_assert_eq(waiting, n, "%lld claims queued behind the stall, want %lld", waiting, n);
}

/* Without the round, each of the 15 coupons would cost an acquire and a
 * release: 30 scripts. With it, 2 for all of them, and the stalled claim's
 * release: 3. */
Test(app_round, one_round_takes_and_releases_the_locks_of_the_coupons_waiting)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--claim-workers", "1", "--fault-pause-ms", "3000:signal", "--lock-ttl", "10000",
                      "--lock-wait", "6000", NULL);
    long long ids[OTHERS + 1];
    for (size_t i = 0; i <= OTHERS; i++) {
        char name[32];
        snprintf(name, sizeof name, "round-%zu", i);
        ids[i] = app_create_coupon(&g_app.srv[0], name, 5, 1);
    }
    claim_run stalled, others[OTHERS];
    memset(others, 0, sizeof others);
    memset(&stalled, 0, sizeof stalled);
    int64_t t0 = test_now_ms();
    stall_on(&stalled, ids[0]);
    for (size_t i = 0; i < OTHERS; i++) {
        char user[32];
        snprintf(user, sizeof user, "u%zu", i);
        claim_start(&others[i], ids[i + 1], user);
    }
    wait_queued(OTHERS);
    long long before = app_lock_scripts(&g_app.redis[0]);
    /* Counted inside the stall: its claim's own acquisition came before. */
    cr_assert_lt(test_now_ms() - t0, 2800, "the count came after the stall: the machine is too slow for this test");
    claim_expect(&stalled, 200, 0);
    for (size_t i = 0; i < OTHERS; i++)
        claim_expect(&others[i], 200, 0);
    long long scripts = app_lock_scripts(&g_app.redis[0]) - before;
    cr_assert_eq(scripts, 3, "%lld lock scripts for the stalled claim's release and %d coupons' claims (want 3)",
                 scripts, OTHERS);
    for (size_t i = 0; i <= OTHERS; i++) {
        app_coupon_state st;
        app_expect_db(g_app.db, ids[i], 4, 1, &st);
    }
}

/* The held coupon's claim is queued first, so a round that answered it
 * (1005) or waited for it would show: the others come back first, and it
 * is sold once the holder's key expires. */
Test(app_round, a_coupon_held_elsewhere_goes_back_to_its_lane_and_waits)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--claim-workers", "1", "--fault-pause-ms", "1000:signal", "--lock-ttl", "10000",
                      "--lock-wait", "6000", NULL);
    long long stalled_id = app_create_coupon(&g_app.srv[0], "stalled", 5, 1);
    long long held_id = app_create_coupon(&g_app.srv[0], "held", 5, 1);
    long long ids[5];
    for (size_t i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "free-%zu", i);
        ids[i] = app_create_coupon(&g_app.srv[0], name, 5, 1);
    }
    char key[64], out[256];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, held_id);
    claim_run stalled, held, others[5];
    memset(others, 0, sizeof others);
    memset(&stalled, 0, sizeof stalled);
    memset(&held, 0, sizeof held);
    stall_on(&stalled, stalled_id);
    /* Another client's lock on it for 3 s from now: past the stall. */
    const char *set[] = {"SET", key, "another-client", "PX", "3000"};
    app_redis(&g_app.redis[0], out, sizeof out, 5, set);
    int64_t held_until = test_now_ms() + 3000;
    claim_start(&held, held_id, "h");
    test_sleep_ms(50);
    for (size_t i = 0; i < 5; i++) {
        char user[32];
        snprintf(user, sizeof user, "u%zu", i);
        claim_start(&others[i], ids[i], user);
    }
    wait_queued(6);
    claim_expect(&stalled, 200, 0);
    for (size_t i = 0; i < 5; i++) {
        claim_expect(&others[i], 200, 0);
        cr_assert_lt(others[i].done_ms, held_until, "coupon %lld waited for the held coupon", ids[i]);
    }
    claim_expect(&held, 200, 0);
    cr_assert_geq(held.done_ms, held_until - 50, "the held coupon was sold %lld ms before its holder's key expired",
                  (long long)(held_until - held.done_ms));
    app_coupon_state st;
    app_expect_db(g_app.db, held_id, 4, 1, &st);
    for (size_t i = 0; i < 5; i++)
        app_expect_db(g_app.db, ids[i], 4, 1, &st);
}

/* The worker waits for the held coupon's lock in slices (claimq.c,
 * WAIT_SLICE_US): a claim of another coupon that comes meanwhile is
 * answered within a slice, not when the held coupon's wait ends. */
Test(app_round, a_claim_that_comes_while_its_worker_waits_is_not_held_up)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--claim-workers", "1", "--lock-ttl", "10000", "--lock-wait", "6000", NULL);
    long long held_id = app_create_coupon(&g_app.srv[0], "held", 5, 1);
    long long free_id = app_create_coupon(&g_app.srv[0], "free", 5, 1);
    char key[64], out[256];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, held_id);
    claim_run held, other;
    memset(&held, 0, sizeof held);
    memset(&other, 0, sizeof other);
    const char *set[] = {"SET", key, "another-client", "PX", "2500"};
    app_redis(&g_app.redis[0], out, sizeof out, 5, set);
    int64_t held_until = test_now_ms() + 2500;
    claim_start(&held, held_id, "h");
    test_sleep_ms(300); /* its worker now waits for the held coupon */
    int64_t t0 = test_now_ms();
    claim_start(&other, free_id, "f");
    claim_expect(&other, 200, 0);
    cr_assert_lt(other.done_ms - t0, 1000, "the free coupon's claim took %lld ms behind the held one",
                 (long long)(other.done_ms - t0));
    claim_expect(&held, 200, 0);
    cr_assert_geq(held.done_ms, held_until - 50, "the held coupon was sold before its holder's key expired");
    app_coupon_state st;
    app_expect_db(g_app.db, held_id, 4, 1, &st);
    app_expect_db(g_app.db, free_id, 4, 1, &st);
}
