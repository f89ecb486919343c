/* async.c - the event-loop client (dlock_async_*) on libuv against real
 * redis-servers: the calls and their codes, Redlock with nodes killed and
 * paused (the loop keeps serving its timers while a round waits), a lost
 * reply, cancellation at every stage, a free with calls in flight,
 * automatic renewal (kept, taken away, a stalled loop), and a history of
 * async workers beside blocking clients on one key (no two sections
 * overlap, fences strictly increase). */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "async_history.h"
#include "async_loop.h"
#include "delay_proxy.h"
#include "dlock_uv.h"
#include "lock_common.h"
#include "tls_procs.h"

#define NODES 3

static redis_proc nodes[NODES];
static delay_proxy *proxy;

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0, "redis nodes did not start");
    aloop_init();
}

static void teardown(void)
{
    aloop_fini();
    delay_proxy_stop(proxy);
    proxy = NULL;
    tc_nodes_down(nodes, NODES);
}

TestSuite(lock_async, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the calls ---- */

Test(lock_async, acquire_release_extend_on_one_node_as_the_blocking_client)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    dlock_client *b = tc_client(nodes, 1, 0);
    dlock_lock *held = NULL;
    outcome o, x = {0};
    uint64_t fence;

    o = try_acquire(a, "one", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(o.calls, 1);
    fence = dlock_lock_fence(o.lock);
    cr_assert_eq(tc_exists(&nodes[0], "one"), 1);
    /* Held: the blocking client is refused, as against its own kind. */
    cr_assert_eq(dlock_try_acquire(b, "one", 5000, &held), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_async_extend(a, o.lock, 20000, on_done, &x), DLOCK_OK);
    cr_assert(run_until(&x.calls, 5000));
    cr_assert_eq(x.rc, DLOCK_OK, "%s", x.detail);
    cr_assert_gt(tc_pttl(&nodes[0], "one"), 15000, "the extend did not reach the key");
    x = release(a, o.lock);
    cr_assert_eq(x.rc, DLOCK_OK, "%s", x.detail);
    cr_assert_eq(x.calls, 1);
    cr_assert_eq(tc_exists(&nodes[0], "one"), 0);
    /* A second release of the same handle is refused at once. */
    cr_assert_eq(dlock_async_release(a, o.lock, on_done, &x), DLOCK_ERR_ARG);
    dlock_lock_free(o.lock);
    /* The blocking client gets it now, with a larger fence. */
    cr_assert_eq(dlock_try_acquire(b, "one", 5000, &held), DLOCK_OK, "%s", TC_ERR(b));
    cr_assert_gt(dlock_lock_fence(held), fence);
    o = try_acquire(a, "one", 5000);
    cr_assert_eq(o.rc, DLOCK_ERR_TAKEN, "%s", o.detail);
    cr_assert_eq(o.lock, NULL);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK);
    dlock_lock_free(held);
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async, bad_arguments_are_refused_at_once_and_never_call_back)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    dlock_client *b = tc_client(nodes, 1, 0);
    dlock_lock *theirs = NULL;
    outcome o = {0};

    cr_assert_eq(dlock_async_try_acquire(a, "", 1000, on_acquired, &o, NULL), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_async_try_acquire(a, "x", 0, on_acquired, &o, NULL), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_async_release(a, NULL, on_done, &o), DLOCK_ERR_ARG);
    /* A lock of another client is not this client's to release. */
    cr_assert_eq(dlock_try_acquire(b, "theirs", 5000, &theirs), DLOCK_OK);
    cr_assert_eq(dlock_async_release(a, theirs, on_done, &o), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_async_extend(a, theirs, 1000, on_done, &o), DLOCK_ERR_ARG);
    run_until(&o.calls, 200);
    cr_assert_eq(o.calls, 0);
    cr_assert_eq(dlock_release(b, theirs), DLOCK_OK);
    dlock_lock_free(theirs);
    dlock_client_free(b);
    async_down(a);
}

/* ---- Redlock and faults ---- */

Test(lock_async, redlock_holds_with_one_master_killed_and_refuses_with_two)
{
    dlock_async *a = aloop_client(nodes, NODES, 200);
    outcome o;

    o = try_acquire(a, "r", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(tc_count_holding(nodes, NODES, "r"), NODES);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    o = try_acquire(a, "r", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "2 of 3 answered: %s", o.detail);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(redis_kill(&nodes[1]), 0);
    o = try_acquire(a, "r", 5000);
    cr_assert_eq(o.rc, DLOCK_ERR_NO_QUORUM, "1 of 3 answered: %s", o.detail);
    cr_assert_null(o.lock);
    cr_assert_eq(wait_key(&nodes[0], "r", 0, 2000), 0, "the minority's key was not undone");
    async_down(a);
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    cr_assert_eq(redis_restart(&nodes[2]), 0);
}

/* A 10 ms repeating timer of the program's own. */
typedef struct ticker {
    uv_timer_t t;
    int64_t last_ms, worst_gap_ms;
    int ticks;
} ticker;

static void on_tick(uv_timer_t *h)
{
    ticker *k = h->data;
    int64_t now = test_now_ms();

    if (k->last_ms != 0 && now - k->last_ms > k->worst_gap_ms)
        k->worst_gap_ms = now - k->last_ms;
    k->last_ms = now;
    k->ticks++;
}

Test(lock_async, the_loop_serves_its_timers_while_a_round_waits_on_a_paused_master)
{
    dlock_async *a = aloop_client(nodes, NODES, 300);
    ticker k = {0};
    outcome o;

    /* Connected and warm, then one master stops answering. */
    o = try_acquire(a, "warm", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    /* Single-node rounds to the paused master would wait its full command
     * timeout: on one node the loop must keep ticking through it. */
    uv_timer_init(&loop, &k.t);
    k.t.data = &k;
    uv_timer_start(&k.t, on_tick, 10, 10);
    {
        dlock_async *one;
        dlock_options opts;
        tc_addrs addrs;
        char err[DLOCK_ERRSTR_LEN];
        outcome w = {0};

        tc_options(&opts, &addrs, &nodes[1], 1);
        opts.command_timeout_ms = 300;
        cr_assert_eq(dlock_async_new(&opts, &hooks, &one, err, sizeof err), DLOCK_OK, "%s", err);
        cr_assert_eq(dlock_async_try_acquire(one, "p", 5000, on_acquired, &w, NULL), DLOCK_OK);
        o = try_acquire(a, "q", 5000); /* Redlock decides on the other two meanwhile */
        cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
        cr_assert(run_until(&w.calls, 3000));
        cr_assert_eq(w.rc, DLOCK_ERR_TIMEOUT, "%s", w.detail);
        async_down(one);
    }
    uv_timer_stop(&k.t);
    uv_close((uv_handle_t *)&k.t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_gt(k.ticks, 15, "the loop ticked only %d times in the round's 300 ms", k.ticks);
    /* 10 ms asked; a few ms late at worst on a busy 2-core machine, never
     * the round's 300 ms. */
    cr_assert_lt(k.worst_gap_ms, 60, "a 10 ms timer waited %lld ms", (long long)k.worst_gap_ms);
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    async_down(a);
}

/* A client of node 0 through a fresh relay (the suite's proxy), connected
 * and warm (scripts loaded) before the relay starts to lag. */
static dlock_async *relayed_client(int command_timeout_ms)
{
    dlock_options opts;
    tc_addrs addrs;
    dlock_async *a;
    char err[DLOCK_ERRSTR_LEN];
    outcome w;

    proxy = delay_proxy_start(nodes[0].port);
    cr_assert_not_null(proxy);
    tc_options_via(&opts, &addrs, nodes, 1, 0, delay_proxy_port(proxy));
    opts.command_timeout_ms = command_timeout_ms;
    cr_assert_eq(dlock_async_new(&opts, &hooks, &a, err, sizeof err), DLOCK_OK, "%s", err);
    w = try_acquire(a, "warm", 5000);
    cr_assert_eq(w.rc, DLOCK_OK, "%s", w.detail);
    cr_assert_eq(release(a, w.lock).rc, DLOCK_OK);
    dlock_lock_free(w.lock);
    return a;
}

Test(lock_async, a_lost_reply_times_out_and_the_late_answer_is_discarded)
{
    dlock_async *a = relayed_client(200);
    outcome o;

    /* The next command's reply is held 600 ms: past the 200 ms timeout. */
    delay_proxy_lag(proxy, 600);
    test_sleep_ms(150); /* the relay reads the setting once per 100 ms turn */
    o = try_acquire(a, "late", 5000);
    cr_assert_eq(o.rc, DLOCK_ERR_TIMEOUT, "%s: %s", dlock_strerror(o.rc), o.detail);
    delay_proxy_lag(proxy, 0);
    /* The late SET landed and was undone (pass.lua behind it); the late
     * answer, when it comes, is not taken for the next call's. */
    {
        int none = 0;

        run_until(&none, 1000); /* the held SET and its undo go through */
    }
    cr_assert_eq(tc_exists(&nodes[0], "late"), 0, "the late key was not undone");
    o = try_acquire(a, "after", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    async_down(a);
}

/* ---- cancellation ---- */

Test(lock_async, a_cancel_before_the_first_round_calls_back_at_once)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    dlock_async_op *op = NULL;
    outcome o = {0};

    cr_assert_eq(dlock_async_acquire_for(a, "c0", 5000, 2000, on_acquired, &o, &op), DLOCK_OK);
    cr_assert_not_null(op);
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert_eq(o.calls, 1, "the callback did not fire inside the cancel");
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED);
    run_until(&(int){0}, 200);
    cr_assert_eq(o.calls, 1, "the callback fired twice");
    cr_assert_eq(tc_exists(&nodes[0], "c0"), 0);
    async_down(a);
}

/* The polling path (wake_on_release off): attempts with back-off between
 * them; a queued wait's cancel is lock_async_queue's. */
Test(lock_async, a_cancel_between_attempts_ends_the_wait)
{
    dlock_options opts;
    tc_addrs addrs;
    dlock_async *a = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";
    dlock_client *b = tc_client(nodes, 1, 0);
    dlock_lock *held = NULL;
    dlock_async_op *op = NULL;
    outcome o = {0};
    dlock_stats st;

    tc_options(&opts, &addrs, nodes, 1);
    opts.wake_on_release = 0;
    cr_assert_eq(dlock_async_new(&opts, &hooks, &a, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(b, "c1", 20000, &held), DLOCK_OK);
    cr_assert_eq(dlock_async_acquire_for(a, "c1", 5000, 10000, on_acquired, &o, &op), DLOCK_OK);
    /* Retrying: at least two attempts refused. */
    for (int i = 0; i < 100; i++) {
        run_until(&o.calls, 20);
        dlock_async_stats(a, &st);
        if (st.taken >= 2)
            break;
    }
    cr_assert_geq(st.taken, 2, "the acquire did not retry");
    cr_assert_eq(o.calls, 0);
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    run_until(&o.calls, 1000);
    cr_assert_eq(o.calls, 1);
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    cr_assert_eq(dlock_async_cancel(a, op), 0, "a completed call was cancelled again");
    cr_assert_eq(dlock_release(b, held), DLOCK_OK);
    dlock_lock_free(held);
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async, a_cancel_mid_round_hands_on_the_key_granted_meanwhile)
{
    dlock_async *a = relayed_client(2000);
    dlock_async_op *op = NULL;
    outcome o = {0};

    /* The grant's reply is held 400 ms: the cancel comes while it is out. */
    delay_proxy_lag(proxy, 400);
    test_sleep_ms(150); /* the relay reads the setting once per 100 ms turn */
    cr_assert_eq(dlock_async_try_acquire(a, "c2", 60000, on_acquired, &o, &op), DLOCK_OK);
    /* Lands after 400 ms; the reply then waits in the socket until the
     * loop runs again, after the cancel. */
    for (int i = 0; i < 3; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(tc_wait_exists(&nodes[0], "c2", 1, 2000), 1, "the SET did not land");
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert_eq(o.calls, 0, "mid-round, the callback waits for the round");
    delay_proxy_lag(proxy, 0);
    cr_assert(run_until(&o.calls, 3000));
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    cr_assert_null(o.lock);
    /* Granted meanwhile, then handed on: gone long before its 60 s TTL. */
    cr_assert_eq(wait_key(&nodes[0], "c2", 0, 2000), 0, "the granted key was left behind");
    async_down(a);
}

Test(lock_async, free_completes_every_call_in_flight_once)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    dlock_client *b = tc_client(nodes, 1, 0);
    dlock_lock *held = NULL;
    outcome o[4];

    memset(o, 0, sizeof o);
    cr_assert_eq(dlock_try_acquire(b, "f1", 20000, &held), DLOCK_OK);
    /* Two waiting out a held key, one in its first round, one not started. */
    cr_assert_eq(dlock_async_acquire_for(a, "f1", 5000, 10000, on_acquired, &o[0], NULL),
                 DLOCK_OK);
    cr_assert_eq(dlock_async_acquire_for(a, "f1", 5000, 10000, on_acquired, &o[1], NULL),
                 DLOCK_OK);
    run_until(&(int){0}, 100);
    cr_assert_eq(dlock_async_try_acquire(a, "f2", 5000, on_acquired, &o[2], NULL), DLOCK_OK);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(dlock_async_try_acquire(a, "f3", 5000, on_acquired, &o[3], NULL), DLOCK_OK);
    dlock_async_free(a);
    cr_assert_eq(o[3].rc, DLOCK_ERR_CANCELLED, "%s", o[3].detail);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(o[i].calls, 1, "call %d: %d callbacks before the free returned", i,
                     o[i].calls);
        if (o[i].rc == DLOCK_OK) { /* f2 may have been granted before the free */
            dlock_lock_free(o[i].lock);
            continue;
        }
        cr_assert_eq(o[i].rc, DLOCK_ERR_CANCELLED, "call %d: %s", i, o[i].detail);
    }
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    /* A first round cancelled in flight: its key was handed on, not left. */
    if (o[2].rc == DLOCK_ERR_CANCELLED)
        cr_assert_eq(tc_wait_exists(&nodes[0], "f2", 0, 2000), 0, "f2's key was left behind");
    cr_assert_eq(tc_exists(&nodes[0], "f3"), 0);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK);
    dlock_lock_free(held);
    dlock_client_free(b);
}

/* ---- over TLS ---- */

/* The event-loop client on TLS-only masters that want a client
 * certificate: the same locks; without the certificate, refused. */
Test(lock_async, over_tls_masters_with_a_client_certificate)
{
    char dir[256], ca[300], crt[300], key[300], urls[NODES][96], err[DLOCK_ERRSTR_LEN];
    const char *addrs[NODES];
    tls_redis srv[NODES];
    dlock_options opts;
    dlock_async *a = NULL;
    outcome o;

    if (dlock_addr_check("rediss://127.0.0.1:1", err, sizeof err) != DLOCK_OK)
        cr_skip_test("this libdlock was built without TLS (-DDLOCK_HIREDIS=bundled has it)");
    memset(srv, 0, sizeof srv);
    cr_assert_eq(test_mkdtemp(dir, sizeof dir, "dlock-async-tls-"), 0);
    cr_assert_eq(tls_make_certs(dir), 0);
    for (size_t i = 0; i < NODES; i++) {
        cr_assert_eq(tls_redis_start(&srv[i], dir, "yes"), 0);
        snprintf(urls[i], sizeof urls[i], "rediss://localhost:%d", srv[i].port);
        addrs[i] = urls[i];
    }
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(crt, sizeof crt, "%s/client.crt", dir);
    snprintf(key, sizeof key, "%s/client.key", dir);
    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = NODES;
    opts.tls_ca_file = ca;
    opts.tls_cert_file = crt;
    opts.tls_key_file = key;
    opts.connect_timeout_ms = 1000;
    opts.command_timeout_ms = 1000;
    cr_assert_eq(dlock_async_new(&opts, &hooks, &a, err, sizeof err), DLOCK_OK, "%s", err);
    o = try_acquire(a, "tls:async", 5000);
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_gt(dlock_lock_fence(o.lock), 0);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    async_down(a);
    /* No client certificate: every master refuses the handshake. */
    opts.tls_cert_file = NULL;
    opts.tls_key_file = NULL;
    cr_assert_eq(dlock_async_new(&opts, &hooks, &a, err, sizeof err), DLOCK_OK, "%s", err);
    o = try_acquire(a, "tls:async", 5000);
    cr_assert_eq(o.rc, DLOCK_ERR_NO_QUORUM, "%s: %s", dlock_strerror(o.rc), o.detail);
    cr_assert_null(o.lock);
    async_down(a);
    for (size_t i = 0; i < NODES; i++)
        tls_redis_stop(&srv[i]);
    test_rmtree(dir);
}

/* ---- several resources ---- */

Test(lock_async, several_resources_as_one_lock_on_redlock)
{
    dlock_async *a = aloop_client(nodes, NODES, 0);
    dlock_client *b = tc_client(nodes, NODES, 0);
    const char *const set[3] = {"acct:a", "acct:b", "acct:c"};
    dlock_lock *held = NULL;
    outcome o = {0}, x = {0};

    /* One of them held elsewhere: none is taken. */
    cr_assert_eq(dlock_try_acquire(b, "acct:b", 5000, &held), DLOCK_OK);
    cr_assert_eq(dlock_async_acquire_multi(a, set, 3, 5000, INT64_MIN, on_acquired, &o, NULL),
                 DLOCK_OK);
    cr_assert(run_until(&o.calls, 5000));
    cr_assert_eq(o.rc, DLOCK_ERR_TAKEN, "%s", o.detail);
    cr_assert_eq(tc_count_holding(nodes, NODES, "acct:a"), 0, "a partial set was left");
    cr_assert_eq(dlock_release(b, held), DLOCK_OK);
    dlock_lock_free(held);
    /* Free: all three, a fence each, as one lock. */
    o = (outcome){0};
    cr_assert_eq(dlock_async_acquire_multi_for(a, set, 3, 5000, 2000, on_acquired, &o, NULL),
                 DLOCK_OK);
    cr_assert(run_until(&o.calls, 5000));
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(dlock_lock_count(o.lock), 3);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_str_eq(dlock_lock_resource_of(o.lock, i), set[i]);
        cr_assert_gt(dlock_lock_fence_of(o.lock, i), 0);
        cr_assert_eq(tc_count_holding(nodes, NODES, set[i]), NODES);
    }
    cr_assert_eq(dlock_try_acquire(b, "acct:c", 5000, &held), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_async_extend(a, o.lock, 20000, on_done, &x), DLOCK_OK);
    cr_assert(run_until(&x.calls, 5000));
    cr_assert_eq(x.rc, DLOCK_OK, "%s", x.detail);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(tc_count_holding(nodes, NODES, set[i]), 0);
    dlock_lock_free(o.lock);
    /* Bad sets are refused at once. */
    cr_assert_eq(dlock_async_acquire_multi(a, (const char *const[]){"x", "x"}, 2, 5000,
                                           INT64_MIN, on_acquired, &o, NULL),
                 DLOCK_ERR_ARG);
    dlock_client_free(b);
    async_down(a);
}

/* ---- automatic renewal ---- */

typedef struct lost_seen {
    int calls;
    dlock_err why;
    int free_inside; /* free the lock from inside on_lost */
} lost_seen;

static void on_lost(const dlock_lock *lock, dlock_err why, void *user)
{
    lost_seen *l = user;

    l->calls++;
    l->why = why;
    if (l->free_inside)
        dlock_lock_free((dlock_lock *)lock);
}

static void run_for(int64_t ms)
{
    int none = 0;

    run_until(&none, ms);
}

Test(lock_async, renewal_keeps_the_lock_past_its_ttl_until_released)
{
    dlock_async *a = aloop_client(nodes, NODES, 0);
    lost_seen l = {0};
    dlock_renew_options ro = {.on_lost = on_lost, .user = &l};
    outcome o = try_acquire(a, "renewed", 300);

    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(dlock_async_auto_renew(a, o.lock, &ro), DLOCK_OK);
    run_for(1000); /* more than 3 TTLs */
    cr_assert_eq(l.calls, 0, "on_lost fired: %d", l.why);
    cr_assert(dlock_is_held(o.lock));
    cr_assert_geq(dlock_lock_renewals(o.lock), 4, "renewals: %u", dlock_lock_renewals(o.lock));
    cr_assert_eq(tc_count_holding(nodes, NODES, "renewed"), NODES);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    {
        uint32_t after = dlock_lock_renewals(o.lock);

        run_for(400);
        cr_assert_eq(dlock_lock_renewals(o.lock), after, "renewed after the release");
    }
    cr_assert_eq(tc_count_holding(nodes, NODES, "renewed"), 0);
    dlock_lock_free(o.lock);
    async_down(a);
}

Test(lock_async, a_renewed_lock_taken_away_calls_on_lost_once)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    lost_seen l = {.free_inside = 1};
    dlock_renew_options ro = {.on_lost = on_lost, .user = &l};
    outcome o = try_acquire(a, "stolen", 600);
    char key[TC_KEY_LEN], out[64];

    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(dlock_async_auto_renew(a, o.lock, &ro), DLOCK_OK);
    /* Someone else's token in its place: the next renewal finds it gone. */
    tc_cmd(&nodes[0], out, sizeof out, 5,
           (const char *const[]){"SET", tc_lock_key(key, "stolen"), "not-ours", "PX", "60000"});
    run_for(800);
    cr_assert_eq(l.calls, 1, "on_lost calls: %d", l.calls);
    cr_assert_eq(l.why, DLOCK_ERR_LOST);
    /* The lock was freed inside on_lost; the other token's key stays. */
    cr_assert_eq(tc_exists(&nodes[0], "stolen"), 1);
    run_for(300);
    cr_assert_eq(l.calls, 1, "on_lost fired again");
    async_down(a);
}

Test(lock_async, a_loop_stalled_past_the_validity_is_told_it_lost_the_lock)
{
    dlock_async *a = aloop_client(nodes, 1, 0);
    lost_seen l = {0};
    dlock_renew_options ro = {.on_lost = on_lost, .user = &l};
    outcome o = try_acquire(a, "stalled", 300);

    char key[TC_KEY_LEN], out[64];

    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(dlock_async_auto_renew(a, o.lock, &ro), DLOCK_OK);
    /* The node keeps the key longer than the client counts on (a clock
     * running slow): only the client's own validity check can refuse to
     * revive it, since the late extend would find our token. */
    tc_cmd(&nodes[0], out, sizeof out, 3,
           (const char *const[]){"PEXPIRE", tc_lock_key(key, "stalled"), "60000"});
    cr_assert_str_eq(out, "1");
    /* The loop's thread stalls past the validity: no renewal could run. */
    test_sleep_ms(450);
    run_for(200);
    cr_assert_eq(l.calls, 1, "on_lost calls: %d", l.calls);
    cr_assert_eq(l.why, DLOCK_ERR_LOST);
    cr_assert_not(dlock_is_held(o.lock), "held after its validity ran out");
    cr_assert_eq(dlock_lock_renewals(o.lock), 0, "a renewal revived it");
    dlock_lock_free(o.lock);
    async_down(a);
}

/* ---- history: async workers beside blocking clients on one key ---- */

static void history(size_t n)
{
    async_history h;

    cr_assert_eq(async_history_run(&loop, &hooks, nodes, n, 16, 2, 12, 60000, &h), 0);
    cr_assert_eq(h.unfinished, 0, "%d async workers did not finish", h.unfinished);
    cr_assert_eq(h.failures, 0, "%d acquires or releases failed", h.failures);
    cr_assert_eq(h.overlaps, 0, "%d sections overlapped", h.overlaps);
    cr_assert_eq(h.fence_regressions, 0, "%d fences did not increase", h.fence_regressions);
    cr_assert_eq(h.sections, (16 + 2) * 12, "sections: %d", h.sections);
}

Test(lock_async, history_of_async_and_blocking_workers_on_one_node, .timeout = 90)
{
    history(1);
}

Test(lock_async, history_of_async_and_blocking_workers_on_redlock, .timeout = 90)
{
    history(NODES);
}
