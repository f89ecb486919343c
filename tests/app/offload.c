/* offload.c - claims run on claim workers, not on the HTTP threads.
 *   - While claims wait for a lock service that lost its quorum (2 of 3
 *     Redis nodes SIGSTOPped), reads, /healthz and /metrics are still
 *     answered, and before the claims are.
 *   - Every claim is answered 503 within a bound set by --lock-wait (the
 *     time it spent queued counts).
 *   - A full claim queue answers at once. Real processes: 3 redis-servers and one coupon-server. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

#define LOCK_WAIT_MS 1000
/* A round against a stopped node ends at this timeout: each claim that
 * reaches Redis takes at least this long, which is what makes the reads'
 * head start measurable (the test asserts order, not a duration). */
#define REDIS_TIMEOUT_MS "500"
/* More claims than HTTP threads (2): inline, they would take them all. */
#define N_CLAIMS 8
/* The loose bound: the point is that one exists (the machine is shared). */
#define CLAIM_BOUND_MS (3 * LOCK_WAIT_MS)

const app_suite_plan app_plan = {.db_name = "offload.db", .flags = APP_ENV_CURL, .nredis = 3, .nservers = 0};
TestSuite(app_offload, .init = app_suite_init, .fini = app_suite_fini, .timeout = 90);

typedef struct claim_call {
    const server_proc *srv;
    long long coupon_id;
    int idx;
    long status;
    long long code;
    char msg[256];
    int has_retry_after;
    int64_t took_ms;
    int64_t done_seq;       /* order of answers among claims and reads, from 1 */
} claim_call;

static atomic_int g_claims_answered; /* claims answered so far */
static atomic_llong g_seq;           /* answers so far, claims and reads */

static void *claim_main(void *arg)
{
    claim_call *c = arg;
    char url[256];
    http_reply r;

    snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=off%d", c->srv->url, c->coupon_id,
             c->idx);
    int64_t t0 = test_now_ms();
    int rc = http_request("POST", url, NULL, NULL, &r);
    c->took_ms = test_now_ms() - t0;
    c->done_seq = atomic_fetch_add(&g_seq, 1) + 1;
    atomic_fetch_add(&g_claims_answered, 1);
    c->status = rc == 0 ? r.status : 0;
    c->code = -1;
    c->has_retry_after = r.retry_after[0] != '\0';
    if (rc == 0 && r.body != NULL) {
        json_t *root = json_loads(r.body, 0, NULL);
        json_t *code = json_object_get(root, "code");
        json_t *msg = json_object_get(root, "msg");
        if (json_is_integer(code))
            c->code = json_integer_value(code);
        if (json_is_string(msg))
            snprintf(c->msg, sizeof c->msg, "%s", json_string_value(msg));
        json_decref(root);
    }
    if (rc == 0)
        http_reply_free(&r);
    return NULL;
}

/* Starts claims [from, n) on their own threads. */
static void start_claims_from(claim_call *calls, pthread_t *th, size_t from, size_t n, const server_proc *s,
                              long long coupon_id)
{
    for (size_t i = from; i < n; i++) {
        memset(&calls[i], 0, sizeof calls[i]);
        calls[i].srv = s;
        calls[i].coupon_id = coupon_id;
        calls[i].idx = (int)i;
        cr_assert_eq(pthread_create(&th[i], NULL, claim_main, &calls[i]), 0, "cannot start claim thread %zu", i);
    }
}

static void start_claims(claim_call *calls, pthread_t *th, size_t n, const server_proc *s, long long coupon_id)
{
    atomic_store(&g_claims_answered, 0);
    atomic_store(&g_seq, 0);
    start_claims_from(calls, th, 0, n, s, coupon_id);
}

static void let_claims_arrive(void);

/* The first claim alone, so that it is the one the single worker runs;
 * the others once it is in, so that they queue behind it. */
static void start_first_then_queue(claim_call *calls, pthread_t *th, size_t n, const server_proc *s,
                                   long long coupon_id)
{
    start_claims(calls, th, 1, s, coupon_id);
    let_claims_arrive();
    start_claims_from(calls, th, 1, n, s, coupon_id);
}

static void join_claims(pthread_t *th, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
}

/* GET path; asserts it answered with want_status (0: any status); returns
 * how many claims had been answered when this answer arrived. */
static int read_while_claiming(const server_proc *s, const char *path, long want_status)
{
    http_reply r;
    app_request(s, "GET", path, NULL, NULL, &r);
    int claims_before = atomic_load(&g_claims_answered);
    (void)atomic_fetch_add(&g_seq, 1);
    if (want_status != 0)
        cr_assert_eq(r.status, want_status, "GET %s answered %ld, not %ld: %s", path, r.status, want_status,
                     r.body != NULL ? r.body : "");
    else
        cr_assert(r.status != 0, "GET %s got no answer", path);
    http_reply_free(&r);
    return claims_before;
}

/* Sleeps in steps until the server has accepted every claim (its
 * coupon_http_requests in flight are not exposed, so: the claim threads
 * have had time to connect and send; the claims then wait on the stopped
 * nodes for at least REDIS_TIMEOUT_MS, far longer than this). */
static void let_claims_arrive(void)
{
    test_sleep_ms(150);
}

Test(app_offload, claims_waiting_on_the_lock_do_not_hold_the_threads_that_serve_reads)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--threads", "2", "--claim-workers", "2", "--lock-wait", "1000",
                      "--redis-timeout-ms", REDIS_TIMEOUT_MS, "--log-level", "error", NULL);
    const server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "offload", 1000, 0);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/coupon/%lld", id);
    app_claim_expect(s, "POST", id, "before", 200, 0, 0);

    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);
    /* /healthz answers from the health prober's last round: wait (bounded)
     * until it has seen the quorum lost. */
    int64_t until = test_now_ms() + 10000;
    for (long st = 0; st != 503 && test_now_ms() < until;) {
        http_reply hr;
        app_request(s, "GET", "/healthz", NULL, NULL, &hr);
        st = hr.status;
        http_reply_free(&hr);
        if (st != 503)
            test_sleep_ms(50);
    }

    claim_call calls[N_CLAIMS];
    pthread_t th[N_CLAIMS];
    start_claims(calls, th, N_CLAIMS, s, id);
    let_claims_arrive();
    /* Reads that touch neither Redis nor the lock: answered before any
     * claim is. Inline on the HTTP threads, both threads would be inside
     * claims and these would wait for one to end. */
    int before_metrics = read_while_claiming(s, "/metrics", 200);
    int before_coupon = read_while_claiming(s, path, 200);
    /* /healthz answers from the prober's last round (503: quorum lost),
     * at once, while claims are outstanding. */
    int before_health = read_while_claiming(s, "/healthz", 503);
    join_claims(th, N_CLAIMS);

    cr_expect_eq(before_metrics, 0, "GET /metrics answered after %d claim(s): a claim held its thread",
                 before_metrics);
    cr_expect_eq(before_coupon, 0, "GET %s answered after %d claim(s): a claim held its thread", path,
                 before_coupon);
    cr_expect_lt(before_health, N_CLAIMS, "GET /healthz answered only after every claim");
    int64_t slowest = 0;
    for (size_t i = 0; i < N_CLAIMS; i++) {
        const claim_call *c = &calls[i];
        /* 1006: no quorum; 1005: its --lock-wait ran out (in the claim
         * queue or behind the claim of this server that held the round). */
        cr_expect(c->status == 503 && (c->code == 1005 || c->code == 1006),
                  "claim %zu: HTTP %ld code %lld (%s), not 503 / 1005 or 1006", i, c->status, c->code, c->msg);
        cr_expect(c->has_retry_after, "claim %zu: 503 without Retry-After", i);
        cr_expect_leq(c->took_ms, CLAIM_BOUND_MS, "claim %zu took %lld ms, past %d ms (3x --lock-wait): %s", i,
                      (long long)c->took_ms, CLAIM_BOUND_MS, c->msg);
        if (c->took_ms > slowest)
            slowest = c->took_ms;
    }
    cr_log_info("app_offload: slowest of %d claims %lld ms (--lock-wait %d)", N_CLAIMS, (long long)slowest,
                LOCK_WAIT_MS);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 999, 1, &st);

    /* The nodes come back: claims succeed again, once the locks the paused
     * nodes still granted from their backlog expire (--lock-ttl) and the
     * breakers probe them again. Bounded. */
    cr_assert_eq(redis_resume(&g_app.redis[1]), 0);
    cr_assert_eq(redis_resume(&g_app.redis[2]), 0);
    long status = 0;
    for (int i = 0; i < 100 && status != 200; i++) {
        http_reply r;
        char user[32];
        snprintf(user, sizeof user, "after%d", i);
        app_claim(s, "POST", id, user, &r);
        status = r.status;
        http_reply_free(&r);
        if (status != 200)
            test_sleep_ms(100);
    }
    cr_assert_eq(status, 200, "claims still refused 10 s after the nodes came back");
    app_expect_db(g_app.db, id, 998, 2, &st);
}

Test(app_offload, a_full_claim_queue_answers_at_once)
{
    APP_SETUP_OK();
    /* One claim running, one waiting: every further claim is refused. */
    app_env_server_up(&g_app, 0, "--threads", "2", "--claim-workers", "1", "--claim-queue", "1", "--lock-wait",
                      "1000", "--redis-timeout-ms", REDIS_TIMEOUT_MS, "--log-level", "error", NULL);
    const server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "full", 1000, 0);
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);

    enum { N = 6 };
    claim_call calls[N];
    pthread_t th[N];
    start_claims(calls, th, N, s, id);
    join_claims(th, N);

    int overload = 0, waited = 0;
    int64_t last_overload_seq = 0, first_waited_seq = N + 1;
    for (size_t i = 0; i < N; i++) {
        const claim_call *c = &calls[i];
        cr_expect(c->status == 503 && (c->code == 1005 || c->code == 1006),
                  "claim %zu: HTTP %ld code %lld (%s), not 503", i, c->status, c->code, c->msg);
        cr_expect(c->has_retry_after, "claim %zu: 503 without Retry-After", i);
        if (strstr(c->msg, "--claim-queue") != NULL) {
            cr_expect_eq(c->code, 1005, "the overload answer is the contract's 1005: %s", c->msg);
            overload++;
            if (c->done_seq > last_overload_seq)
                last_overload_seq = c->done_seq;
        } else {
            waited++;
            if (c->done_seq < first_waited_seq)
                first_waited_seq = c->done_seq;
        }
    }
    /* One running and one queued at most; at least one ran (the first to
     * arrive found the queue empty). */
    cr_expect(waited >= 1 && waited <= 2, "%d claims ran or queued with one worker and a queue of one", waited);
    cr_expect_eq(overload, N - waited, "every other claim is refused for the full queue");
    /* At once: every refusal arrived before any claim that went to Redis
     * (those wait for the stopped nodes). */
    cr_expect_lt(last_overload_seq, first_waited_seq, "a refusal came after a claim that waited on Redis");
    cr_expect_eq(app_metric(s, "coupon_claims_total{result=\"overload\"}"), overload);
    cr_assert_eq(redis_resume(&g_app.redis[1]), 0);
    cr_assert_eq(redis_resume(&g_app.redis[2]), 0);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 1000, 0, &st);
}

/* The deadline is fixed at arrival. A claim whose --lock-wait passed while
 * it waited in the claim queue is answered 1005 when a worker reaches it,
 * without a round to Redis. The lock service is up, so this is contention,
 * not an outage; with the quorum lost it is 1006 (app_outcomes/quorum_lost_*).
 * One worker, held by a claim that got the lock and spends a whole
 * --work-us in its critical section, longer than --lock-wait. */
Test(app_offload, a_claim_queued_past_its_wait_is_answered_1005_without_a_round)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--threads", "2", "--claim-workers", "1", "--lock-wait", "300", "--work-us",
                      "1000000", "--log-level", "error", NULL);
    const server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "expired", 1000, 0);
    long long timeouts_before = app_metric(s, "coupon_lock_errors_total{kind=\"timeout\"}");
    long long acquired_before = app_metric(s, "coupon_lock_acquisitions_total");

    enum { N = 4 };
    claim_call calls[N];
    pthread_t th[N];
    start_first_then_queue(calls, th, N, s, id);
    join_claims(th, N);

    cr_expect(calls[0].status == 200 && calls[0].code == 0, "the running claim: HTTP %ld code %lld (%s)",
              calls[0].status, calls[0].code, calls[0].msg);
    for (size_t i = 1; i < N; i++) {
        const claim_call *c = &calls[i];
        cr_expect(c->status == 503 && c->code == 1005 && strstr(c->msg, "claim queue") != NULL,
                  "claim %zu queued past its wait: HTTP %ld code %lld (%s), not 503 / 1005 from the queue", i,
                  c->status, c->code, c->msg);
        cr_expect(c->has_retry_after, "claim %zu: 503 without Retry-After", i);
    }
    /* Counted as lock wait timeouts (outcome.h: "or queued past it"), and
     * only the running claim took the lock. */
    cr_expect_eq(app_metric(s, "coupon_lock_errors_total{kind=\"timeout\"}") - timeouts_before, N - 1);
    cr_expect_eq(app_metric(s, "coupon_lock_acquisitions_total") - acquired_before, 1);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 999, 1, &st);
}

/* SIGTERM with claims queued and no grace (--shutdown-grace-ms 0): the
 * queued ones are answered 503 "server stopping" without running, the one
 * running finishes (its Redis round ends), every client gets an answer,
 * nothing is written, and the server exits 0 (its workers joined). */
Test(app_offload, sigterm_refuses_queued_claims_and_finishes_the_running_one)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--threads", "2", "--claim-workers", "1", "--lock-wait", "3000",
                      "--redis-timeout-ms", "1000", "--shutdown-grace-ms", "0", "--log-level", "error", NULL);
    server_proc *s = &g_app.srv[0];
    long long id = app_create_coupon(s, "stop", 1000, 0);
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);

    enum { N = 4 };
    claim_call calls[N];
    pthread_t th[N];
    start_first_then_queue(calls, th, N, s, id);
    let_claims_arrive();
    int exit_status = -1;
    cr_assert_eq(server_stop(s, SIGTERM, &exit_status), 0);
    join_claims(th, N);
    cr_expect_eq(exit_status, 0, "coupon-server exited %d on SIGTERM", exit_status);

    cr_expect(calls[0].status == 503 && calls[0].code == 1006, "the running claim: HTTP %ld code %lld (%s)",
              calls[0].status, calls[0].code, calls[0].msg);
    for (size_t i = 1; i < N; i++) {
        const claim_call *c = &calls[i];
        cr_expect(c->status == 503 && c->code == 1005 && strstr(c->msg, "server stopping") != NULL,
                  "queued claim %zu at SIGTERM: HTTP %ld code %lld (%s), not 503 / 1005 server stopping", i,
                  c->status, c->code, c->msg);
    }
    cr_assert_eq(redis_resume(&g_app.redis[1]), 0);
    cr_assert_eq(redis_resume(&g_app.redis[2]), 0);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 1000, 0, &st);
}
