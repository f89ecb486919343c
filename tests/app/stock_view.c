/* stock_view.c - the sold-out fast path answered from the server's stock
 * view (app/src/claim/stock_view.h):
 *   - once sold out, claims are refused before the lock with no store
 *     round trip and no Redis command;
 *   - one unit under a concurrent crowd is sold exactly once;
 *   - a burst spares round trips (coupon_stock_peeks_total);
 *   - "not found" is never remembered, so a coupon created after a 1002
 *     (here or on the other server) is claimable at once;
 *   - under a strategy that can raise a stock, a remembered 0 lasts no
 *     longer than --stock-view-ms.
 * Built twice: on a SQLite file
 * (app_stock_view) and on PostgreSQL (app_stock_view_pg). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "view.db", .pg = APP_PG, .flags = APP_ENV_CURL};
#define VIEW_SUITE APP_SUITE(app_stock_view)
TestSuite(VIEW_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

#define PEEKS(result) "coupon_stock_peeks_total{result=\"" result "\"}"
#define SOLD_OUT(path) "coupon_sold_out_total{path=\"" path "\"}"
#define ACQUIRED "coupon_lock_acquisitions_total"

/* app_expect_db with a state of its own. */
static void expect_db(long long id, long long stock, long long records)
{
    app_coupon_state st;
    app_expect_db(g_app.db, id, stock, records, &st);
}

static void claim_code(size_t srv, long long id, const char *user, long status, long long code)
{
    app_claim_expect(&g_app.srv[srv], "POST", id, user, status, code, 0);
}

/* Once sold out, a claim is answered 1003 before the lock from what the
 * section that sold the last unit told the view: not a lock command, not
 * a store round trip, not a claim queued. */
Test(VIEW_SUITE, sold_out_before_the_lock_without_a_round_trip)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, "--lock-wait", "5000", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "last-two", 2, 1);
    claim_code(0, id, "u1", 200, 0);
    claim_code(0, id, "u2", 200, 0); /* its section leaves 0: the view learns it */

    const server_proc *s = &g_app.srv[0];
    long long issued = app_metric(s, PEEKS("issued")), saved = app_metric(s, PEEKS("saved"));
    long long fast = app_metric(s, SOLD_OUT("fast")), locked = app_metric(s, SOLD_OUT("locked"));
    long long acquired = app_metric(s, ACQUIRED), scripts = app_lock_scripts(&g_app.redis[0]);
    for (int i = 0; i < 20; i++) {
        char user[32];
        snprintf(user, sizeof user, "late%d", i);
        claim_code(0, id, user, 409, 1003);
    }
    long long d_fast = app_metric(s, SOLD_OUT("fast")) - fast, d_locked = app_metric(s, SOLD_OUT("locked")) - locked;
    long long d_acq = app_metric(s, ACQUIRED) - acquired, d_scripts = app_lock_scripts(&g_app.redis[0]) - scripts;
    long long d_issued = app_metric(s, PEEKS("issued")) - issued, d_saved = app_metric(s, PEEKS("saved")) - saved;
    cr_assert_eq(d_fast, 20, "late claims refused before the lock: %lld of 20 (under it: %lld)", d_fast, d_locked);
    cr_assert_eq(d_locked, 0);
    cr_assert_eq(d_acq, 0, "%lld locks taken once sold out", d_acq);
    cr_assert_eq(d_scripts, 0, "%lld lock scripts ran on Redis once sold out", d_scripts);
    cr_assert_eq(d_issued, 0, "%lld store round trips once the view knew 0", d_issued);
    cr_assert_eq(d_saved, 20, "%lld of 20 answered from the view", d_saved);
    expect_db(id, 0, 2);
}

/* A bundle's fast path asks the same view: a sold-out member refuses the
 * bundle before any lock, with no round trip. */
Test(VIEW_SUITE, bundle_sold_out_before_the_lock)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, "--lock-wait", "5000", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "rare", 1, 1);
    long long b = app_create_coupon(&g_app.srv[0], "common", 10, 1);
    char path[128];
    http_reply r;
    snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=b1&coupon_ids=%lld,%lld", a, b);
    app_request(&g_app.srv[0], "POST", path, NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);

    const server_proc *s = &g_app.srv[0];
    long long issued = app_metric(s, PEEKS("issued")), acquired = app_metric(s, ACQUIRED);
    long long scripts = app_lock_scripts(&g_app.redis[0]);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=b%d&coupon_ids=%lld,%lld", i + 2, b, a);
        app_request(&g_app.srv[0], "POST", path, NULL, NULL, &r);
        json_t *root = app_expect(&r, 409, 1003);
        json_t *ids = json_object_get(json_object_get(root, "data"), "sold_out");
        cr_assert(json_is_array(ids) && json_array_size(ids) == 1, "%s", r.body);
        cr_assert_eq(json_integer_value(json_array_get(ids, 0)), a, "%s", r.body);
        json_decref(root);
        http_reply_free(&r);
    }
    cr_assert_eq(app_metric(s, ACQUIRED) - acquired, 0);
    cr_assert_eq(app_lock_scripts(&g_app.redis[0]) - scripts, 0);
    cr_assert_eq(app_metric(s, PEEKS("issued")) - issued, 0, "both members known from the first bundle");
    expect_db(a, 0, 1);
    expect_db(b, 9, 1);
}

/* ---- a crowd of concurrent claims -------------------------------------- */

#define CROWD_THREADS 8

typedef struct crowd {
    int idx;
    int claims;        /* this thread's claims */
    long long coupon;
    int spread;        /* over both servers (else srv[0] only) */
    int ok, sold_out, other;
    char first_other[256];
} crowd;

static void *crowd_run(void *arg)
{
    crowd *c = arg;
    CURL *h = curl_easy_init();
    app_body b;

    if (h == NULL) {
        c->other = c->claims;
        snprintf(c->first_other, sizeof c->first_other, "curl_easy_init failed");
        return NULL;
    }
    for (int i = 0; i < c->claims; i++) {
        char url[256];
        long status = 0;
        const server_proc *s = &g_app.srv[c->spread ? (size_t)((c->idx + i) % 2) : 0];
        snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=t%d_%d", s->url, c->coupon, c->idx, i);
        CURLcode rc = app_curl_post(h, url, &b, 5000L, &status);
        json_t *root = NULL;
        long long code = rc == CURLE_OK ? app_body_code(&b, &root) : -1;
        json_decref(root);
        if (status == 200 && code == 0) {
            c->ok++;
        } else if (status == 409 && code == 1003) {
            c->sold_out++;
        } else if (c->other++ == 0) {
            snprintf(c->first_other, sizeof c->first_other, "HTTP %ld: %.200s", status,
                     rc == CURLE_OK ? b.data : curl_easy_strerror(rc));
        }
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* CROWD_THREADS threads x per claims (distinct users) at once; sums. */
static void crowd_go(long long coupon, int per, int spread, int *ok, int *sold_out)
{
    pthread_t th[CROWD_THREADS];
    crowd c[CROWD_THREADS];

    for (int i = 0; i < CROWD_THREADS; i++) {
        c[i] = (crowd){.idx = i, .claims = per, .coupon = coupon, .spread = spread};
        cr_assert_eq(pthread_create(&th[i], NULL, crowd_run, &c[i]), 0);
    }
    *ok = *sold_out = 0;
    for (int i = 0; i < CROWD_THREADS; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_eq(c[i].other, 0, "thread %d: %d unexpected answers, first: %s", i, c[i].other, c[i].first_other);
        *ok += c[i].ok;
        *sold_out += c[i].sold_out;
    }
}

/* Stock 1, 32 claims at once over two servers: exactly one is sold, every
 * other is told 1003, and the store agrees. */
static void one_unit(const char *strategy)
{
    int ok = 0, sold_out = 0;

    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 2, "--strategy", strategy, "--lock-wait", "20000", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "the-one", 1, 1);
    crowd_go(id, 4, 1, &ok, &sold_out);
    cr_assert_eq(ok, 1, "%s: %d claims succeeded on stock 1", strategy, ok);
    cr_assert_eq(sold_out, CROWD_THREADS * 4 - 1);
    expect_db(id, 0, 1);
}

Test(VIEW_SUITE, one_unit_sold_once_redlock)
{
    one_unit("redlock");
}

Test(VIEW_SUITE, one_unit_sold_once_atomic_sql)
{
    one_unit("atomic-sql");
}

/* A burst on a coupon in stock: every question is counted once, and the
 * view answers some of them without a round trip (the sections feed it);
 * with --stock-view-ms 0 every claim pays its round trip, as before. */
static void burst(const char *view_ms, long long *issued, long long *saved, long long *coalesced)
{
    int ok = 0, sold_out = 0;
    const server_proc *s = &g_app.srv[0];

    app_env_up(&g_app, 1, 0, 1, "--lock-wait", "20000", "--stock-view-ms", view_ms, NULL);
    long long id = app_create_coupon(s, "plenty", 100000, 1);
    long long i0 = app_metric(s, PEEKS("issued")), s0 = app_metric(s, PEEKS("saved"));
    long long c0 = app_metric(s, PEEKS("coalesced"));
    crowd_go(id, 40, 0, &ok, &sold_out);
    cr_assert_eq(ok, CROWD_THREADS * 40);
    cr_assert_eq(sold_out, 0);
    *issued = app_metric(s, PEEKS("issued")) - i0;
    *saved = app_metric(s, PEEKS("saved")) - s0;
    *coalesced = app_metric(s, PEEKS("coalesced")) - c0;
    cr_assert_eq(*issued + *saved + *coalesced, CROWD_THREADS * 40, "one answer per claim: %lld + %lld + %lld",
                 *issued, *saved, *coalesced);
    expect_db(id, 100000 - CROWD_THREADS * 40, CROWD_THREADS * 40);
}

Test(VIEW_SUITE, burst_saves_round_trips)
{
    long long issued, saved, coalesced;

    APP_SETUP_OK();
    /* 60 s: fresh for the whole burst whatever the machine's load, so
     * after the first batch every question is the view's. */
    burst("60000", &issued, &saved, &coalesced);
    cr_assert_gt(saved, 0, "no question answered by the view (issued %lld)", issued);
    cr_assert_lt(issued, CROWD_THREADS * 40 / 2, "issued %lld of %d", issued, CROWD_THREADS * 40);
}

Test(VIEW_SUITE, no_view_peeks_every_claim)
{
    long long issued, saved, coalesced;

    APP_SETUP_OK();
    burst("0", &issued, &saved, &coalesced);
    cr_assert_eq(issued, CROWD_THREADS * 40);
    cr_assert_eq(saved + coalesced, 0);
}

/* "Not found" is not remembered: a coupon created after a claim was told
 * 1002 (on this server, or on the other one) is claimable at once on both. */
Test(VIEW_SUITE, created_after_not_found_is_claimable)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 2, "--lock-wait", "5000", NULL);
    long long first = app_create_coupon(&g_app.srv[0], "first", 5, 1);
    long long next = first + 1;
    claim_code(0, next, "early0", 404, 1002);
    claim_code(1, next, "early1", 404, 1002);
    claim_code(1, next, "early2", 404, 1002);
    /* Ids are handed out in order (SQLite: max + 1; PostgreSQL: the
     * identity's sequence) and nothing else creates coupons here. */
    long long made = app_create_coupon(&g_app.srv[0], "second", 2, 1);
    cr_assert_eq(made, next);
    claim_code(1, next, "later1", 200, 0); /* the other server: no invalidation reached it */
    claim_code(0, next, "later0", 200, 0);
    claim_code(0, next, "later2", 409, 1003);
    expect_db(next, 0, 2);
}

/* Sold out on one server, the other's view still says "in stock": its
 * claims go on to the strategy, which refuses them under the lock (never a
 * sale), and from then on its view knows 0 too. No claim is refused while
 * stock is left: stock 3 sold one at a time, alternating servers. */
Test(VIEW_SUITE, two_servers_agree)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 2, "--lock-wait", "5000", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "three", 3, 1);
    claim_code(0, id, "a", 200, 0);
    claim_code(1, id, "b", 200, 0);
    claim_code(0, id, "c", 200, 0); /* srv[1] last learned stock 1 */
    long long locked = app_metric(&g_app.srv[1], SOLD_OUT("locked"));
    claim_code(1, id, "d", 409, 1003);
    claim_code(1, id, "e", 409, 1003);
    long long by_lock = app_metric(&g_app.srv[1], SOLD_OUT("locked")) - locked;
    cr_assert_leq(by_lock, 1, "the second late claim must be refused before the lock");
    expect_db(id, 0, 3);
}

/* Under a strategy that can write back a stale, higher stock (none), a
 * remembered 0 is trusted only while fresh: once the stock is raised in
 * the store (here by hand, as such a stale write would), a claim after
 * --stock-view-ms sees it. */
Test(VIEW_SUITE, unsafe_strategy_forgets_zero)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, "--strategy", "none", "--stock-view-ms", "50", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "raised", 1, 0);
    claim_code(0, id, "u1", 200, 0);
    claim_code(0, id, "u2", 409, 1003);
    app_db_exec(g_app.db, "UPDATE coupon SET stock = 1 WHERE id = %lld", id);
    test_sleep_ms(200); /* 4x the freshness bound */
    claim_code(0, id, "u3", 200, 0);
}

/* A refused bundle teaches the view only its sold-out members: the others
 * were decremented and rolled back (atomic-sql), so the stock they would
 * report is not the store's. Views kept fresh for a minute, so srv[0]
 * still thinks "rare-b" in stock when its bundle reaches the store. */
Test(VIEW_SUITE, refused_bundle_teaches_only_sold_out)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 2, "--strategy", "atomic-sql", "--stock-view-ms", "60000", NULL);
    long long a = app_create_coupon(&g_app.srv[0], "rare-a", 1, 1);
    long long b = app_create_coupon(&g_app.srv[0], "rare-b", 1, 1);
    claim_code(1, b, "other", 200, 0); /* sold out behind srv[0]'s back */
    char path[128];
    http_reply r;
    snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=both&coupon_ids=%lld,%lld", a, b);
    app_request(&g_app.srv[0], "POST", path, NULL, NULL, &r);
    json_decref(app_expect(&r, 409, 1003));
    http_reply_free(&r);
    expect_db(a, 1, 0); /* rolled back whole */
    claim_code(0, a, "single", 200, 0);
    claim_code(0, b, "late", 409, 1003);
    expect_db(a, 0, 1);
}
