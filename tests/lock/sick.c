/* sick.c - a sick minority costs (almost) nothing. One of three masters
 * is paused, tarpitted (accepts connections in the kernel, never answers),
 * killed or slowed (kept busy by a script, so it answers late), or two of
 * five are paused, or one of three lies about a reply's size. Every
 * acquire still gets its quorum. Once the node's breaker is open, it
 * returns in a fraction of the 2 ms grace, the 100 ms command timeout and
 * the 200 ms connect timeout that waiting for a sick node would cost.
 * After a paused node resumes, no lock key of ours is left on any node.
 * Default client options (connect 200 ms, command 100 ms), as an
 * application would use them. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 5
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_sick, .init = tc_suite_init, .fini = tc_suite_fini);

#define CYCLES 300
/* Cycles before the breaker must be open: a node falls behind by one reply
 * per round the majority decides, and its breaker opens past 4. */
#define WARM 20
/* The median acquire once the breaker is open. A round that waits for the
 * sick node costs at least the 2 ms grace; without it, a loopback round is
 * ~0.2 ms even on a loaded machine. */
#define MEDIAN_MAX_US 1500
/* The slowest acquire once the breaker is open: below the 200 ms connect
 * timeout that waiting on a full accept queue would cost, with room for a
 * scheduler stall on a loaded shared machine (tens of ms seen). */
#define MAX_US 150000
/* The grace a round gives a node that has not answered once the healthy
 * majority decided (rounds.c): an acquire that took this long waited for a
 * sick node (or for the scheduler). */
#define GRACE_US 2000

typedef struct cycle_stats {
    int64_t median_us;
    int64_t max_us;
    int64_t total_ms;
    int graced; /* acquires after WARM that took GRACE_US or longer */
} cycle_stats;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* CYCLES acquire/release cycles on distinct keys "<prefix>:<i>"; every
 * acquire and release must succeed (the healthy majority is a quorum).
 * Latencies of the acquires after WARM go to *st. */
static void run_cycles(dlock_client *c, const char *prefix, cycle_stats *st)
{
    static int64_t lat[CYCLES];
    size_t k = 0;
    int64_t t0 = dlock_now_ms();

    st->graced = 0;
    for (int i = 0; i < CYCLES; i++) {
        char res[64];
        dlock_lock *l = NULL;
        snprintf(res, sizeof res, "%s:%d", prefix, i);
        int64_t a = now_us();
        dlock_err e = dlock_try_acquire(c, res, 10000, &l);
        int64_t b = now_us();
        cr_assert_eq(e, DLOCK_OK, "cycle %d: %s: %s", i, dlock_strerror(e),
                     TC_ERR(c));
        if (i >= WARM) {
            lat[k++] = b - a;
            st->graced += b - a >= GRACE_US;
        }
        e = dlock_release(c, l);
        cr_assert_eq(e, DLOCK_OK, "release %d: %s: %s", i, dlock_strerror(e),
                     TC_ERR(c));
        dlock_lock_free(l);
    }
    st->total_ms = dlock_now_ms() - t0;
    qsort(lat, k, sizeof lat[0], cmp_i64);
    st->median_us = lat[k / 2];
    st->max_us = lat[k - 1];
    cr_log_info("%s: median %lld us, max %lld us, %d of %d >= %d us, %d cycles in %lld ms",
                prefix, (long long)st->median_us, (long long)st->max_us, st->graced,
                CYCLES - WARM, GRACE_US, CYCLES, (long long)st->total_ms);
}

/* Caches the scripts on every node of c and leaves the connections idle and
 * in step, as in a running application before one node falls sick. */
static void warm_up(dlock_client *c)
{
    for (int i = 0; i < 3; i++) {
        dlock_lock *l = NULL;
        cr_assert_eq(dlock_try_acquire(c, "warm", 10000, &l), DLOCK_OK, "%s",
                     TC_ERR(c));
        cr_assert_eq(dlock_release(c, l), DLOCK_OK);
        dlock_lock_free(l);
    }
}

static void assert_cheap(const cycle_stats *st, const char *what)
{
    cr_assert_leq(st->median_us, MEDIAN_MAX_US, "%s: median acquire %lld us", what,
                  (long long)st->median_us);
    cr_assert_leq(st->max_us, MAX_US, "%s: slowest acquire %lld us", what,
                  (long long)st->max_us);
}

/* No lock key "<prefix>:<i>" on any of rs[0..n) (the fence counters stay,
 * by design). Waits (bounded) for late commands to land. */
static void assert_no_lock_keys(const redis_proc *rs, size_t n, const char *prefix)
{
    for (int i = 0; i < CYCLES; i++) {
        char res[64];
        snprintf(res, sizeof res, "%s:%d", prefix, i);
        cr_assert_eq(tc_wait_holding(rs, n, res, 0, TC_SETTLE_MS), 0, "stray key %s", res);
    }
}

Test(lock_sick, one_of_three_paused, .timeout = 60)
{
    dlock_client *c = tc_client(nodes, 3, 0);
    cycle_stats st;
    size_t up = 0;
    dlock_lock *l = NULL;
    cr_assert_not_null(c);
    warm_up(c);
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    run_cycles(c, "sp", &st);

    /* Resumed: the node runs what was queued on the kept connection - each
     * acquire followed by its release - and answers again. */
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(up, 3);
    assert_no_lock_keys(nodes, 3, "sp");
    assert_cheap(&st, "one of three paused");
    /* Its breaker is closed: with another node dead it makes the quorum. */
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    dlock_err e = dlock_try_acquire(c, "sp-after", 5000, &l);
    cr_assert_eq(e, DLOCK_OK, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(tc_wait_exists(&nodes[2], "sp-after", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int tarpit_listen(int *port)
{
    int fd = tc_tarpit(port, 0, NULL);

    cr_assert_geq(fd, 0, "no listening socket");
    return fd;
}

Test(lock_sick, one_of_three_tarpitted, .timeout = 60)
{
    redis_proc set[3];
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    cycle_stats st;
    int port;
    int fd = tarpit_listen(&port);

    memcpy(set, nodes, 2 * sizeof set[0]);
    memset(&set[2], 0, sizeof set[2]);
    snprintf(set[2].addr, sizeof set[2].addr, "127.0.0.1:%d", port);
    tc_options(&o, &a, set, 3);
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    run_cycles(c, "st", &st);
    assert_cheap(&st, "one of three tarpitted");
    assert_no_lock_keys(nodes, 2, "st");
    dlock_client_free(c);
    close(fd);
}

Test(lock_sick, one_of_three_killed, .timeout = 60)
{
    dlock_client *c = tc_client(nodes, 3, 0);
    cycle_stats st;
    cr_assert_not_null(c);
    warm_up(c);
    cr_assert_eq(redis_kill(&nodes[1]), 0);
    run_cycles(c, "sk", &st);
    assert_cheap(&st, "one of three killed");
    assert_no_lock_keys(nodes, 1, "sk");
    assert_no_lock_keys(nodes + 2, 1, "sk");
    /* Back on the same port: a reconnect probe finds it within the probe
     * backoff, and it takes part again (with another node dead, it must). */
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    /* The first attempt may still count on node 2 (its breaker is closed
     * until it fails) and skip node 1: unavailable, and an acquire does not
     * retry that by itself (retry_unavailable is off). The caller's next
     * attempt asks node 1, since the closed breakers no longer make a quorum.
     * Bounded: 3 s. */
    dlock_lock *l = NULL;
    dlock_err e = DLOCK_ERR_NO_QUORUM;
    for (int64_t end = dlock_now_ms() + 3000; e != DLOCK_OK && dlock_now_ms() < end;) {
        e = dlock_acquire(c, "sk-after", 5000, end, &l);
        if (e != DLOCK_OK)
            test_sleep_ms(20);
    }
    cr_assert_eq(e, DLOCK_OK, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_sick, two_of_five_paused, .timeout = 60)
{
    dlock_client *c = tc_client(nodes, 5, 0);
    cycle_stats st;
    size_t up = 0;
    cr_assert_not_null(c);
    warm_up(c);
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    cr_assert_eq(redis_pause(&nodes[3]), 0);
    run_cycles(c, "s5", &st);
    assert_cheap(&st, "two of five paused");
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_resume(&nodes[3]), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(up, 5);
    assert_no_lock_keys(nodes, 5, "s5");
    dlock_client_free(c);
}

/* Keeps one node busy from a thread: a Lua script that spins on TIME for
 * SLOW_BUSY_MS (no writes, so Redis runs it; the server answers nothing
 * meanwhile), then SLOW_REST_MS of rest, until stopped. Busy longer than
 * the 100 ms command timeout, so at times the node answers too late. */
#define SLOW_BUSY_MS 150
#define SLOW_REST_MS 50

typedef struct slow_loop {
    const redis_proc *node;
    atomic_int stop;
    atomic_int scripts; /* busy scripts the node has finished */
    pthread_t thread;
} slow_loop;

static void *slow_loop_run(void *arg)
{
    slow_loop *s = arg;
    char script[200], out[64];
    snprintf(script, sizeof script,
             "local t=redis.call('TIME') local e=t[1]*1000000+t[2]+%d "
             "repeat t=redis.call('TIME') until t[1]*1000000+t[2]>=e return 1",
             SLOW_BUSY_MS * 1000);
    const char *eval[] = {"EVAL", script, "0"};
    while (!atomic_load(&s->stop)) {
        if (redis_cmd(s->node, out, sizeof out, 3, eval) == 0 && strcmp(out, "1") == 0)
            atomic_fetch_add(&s->scripts, 1);
        test_sleep_ms(SLOW_REST_MS);
    }
    return NULL;
}

static void slow_loop_start(slow_loop *s, const redis_proc *node)
{
    s->node = node;
    atomic_init(&s->stop, 0);
    atomic_init(&s->scripts, 0);
    cr_assert_eq(pthread_create(&s->thread, NULL, slow_loop_run, s), 0);
}

/* Returns once the node finished its last script: nothing runs late after. */
static void slow_loop_stop(slow_loop *s)
{
    atomic_store(&s->stop, 1);
    cr_assert_eq(pthread_join(s->thread, NULL), 0);
}

/* Batches of cycles while the node is busy, then rests, then busy again:
 * its breaker opens and closes again and again. Enough batches to span
 * SLOW_SPELLS busy spells (bounded by SLOW_BATCHES); each batch must be as
 * cheap as with a node that never answers, and no key stays behind. */
#define SLOW_SPELLS 5
#define SLOW_BATCHES 40
/* Acquires that wait the grace per busy spell. The first rounds of a spell
 * do, until the node owes more than 4 replies and its breaker opens (~3
 * cycles, plus scheduler stalls: 10-12 a spell seen on 2 shared cores).
 * Without the breaker every acquire of the spell does (~30 in 150 ms),
 * twice this bound. */
#define GRACED_PER_SPELL 15

Test(lock_sick, one_of_three_slowed, .timeout = 120)
{
    dlock_client *c = tc_client(nodes, 3, 0);
    slow_loop slow;
    cycle_stats st;
    int batches = 0, graced = 0;
    char prefix[16];
    cr_assert_not_null(c);
    warm_up(c);
    slow_loop_start(&slow, &nodes[2]);
    while (batches < SLOW_BATCHES && atomic_load(&slow.scripts) < SLOW_SPELLS) {
        snprintf(prefix, sizeof prefix, "sl%d", batches++);
        run_cycles(c, prefix, &st);
        assert_cheap(&st, "one of three slowed");
        graced += st.graced;
    }
    slow_loop_stop(&slow);
    int spells = atomic_load(&slow.scripts);
    cr_assert_geq(spells, SLOW_SPELLS, "only %d busy spells in %d batches", spells, batches);
    cr_assert_leq(graced, GRACED_PER_SPELL * spells,
                  "%d acquires waited the grace in %d busy spells: the breaker did not open",
                  graced, spells);
    for (int b = 0; b < batches; b++) {
        snprintf(prefix, sizeof prefix, "sl%d", b);
        assert_no_lock_keys(nodes, 3, prefix);
    }
    /* It answers again and its breaker closes: with another node dead it
     * makes the quorum (bounded: 3 s, as after a restart). */
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    dlock_lock *l = NULL;
    dlock_err e = DLOCK_ERR_NO_QUORUM;
    for (int64_t end = dlock_now_ms() + 3000; e != DLOCK_OK && dlock_now_ms() < end;) {
        e = dlock_acquire(c, "sl-after", 5000, end, &l);
        if (e != DLOCK_OK)
            test_sleep_ms(20);
    }
    cr_assert_eq(e, DLOCK_OK, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(tc_wait_exists(&nodes[2], "sl-after", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A client with a password against a node that has none: Redis refuses
 * the AUTH, and the client says so (DLOCK_ERR_AUTH, the server's words,
 * whole) on every call, and never runs a command as the default user: no
 * key is set. */
Test(lock_sick, password_against_open_node_is_refused, .timeout = 30)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;

    tc_options(&o, &a, nodes, 1);
    o.password = "not-needed";
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    for (int i = 0; i < 2; i++) {
        dlock_err e = dlock_try_acquire(c, "pw", 5000, &l);

        cr_assert_eq(e, DLOCK_ERR_AUTH, "%s: %s", dlock_strerror(e), TC_ERR(c));
        cr_assert(strstr(TC_ERR(c), "configuration is correct") != NULL, "cut: %s", TC_ERR(c));
        cr_assert_null(l);
    }
    cr_assert_eq(tc_exists(&nodes[0], "pw"), 0);
    dlock_client_free(c);
}

/* A "Redis" that answers each command with one line announcing an array
 * of 100 million elements, then says nothing more: a broken or hostile
 * server. */
#define LIE "*100000000\r\n"
#define LIAR_CONNS 16

typedef struct liar {
    int lfd;
    atomic_int stop;
    pthread_t th;
} liar;

static void *liar_run(void *arg)
{
    liar *l = arg;
    int fds[LIAR_CONNS];
    int n = 0;

    /* Bounded: 50 ms turns for at most 60 s, the test's own timeout. */
    for (int turn = 0; turn < 1200 && !atomic_load(&l->stop); turn++) {
        struct pollfd p[LIAR_CONNS + 1];

        p[0] = (struct pollfd){l->lfd, POLLIN, 0};
        for (int i = 0; i < n; i++)
            p[i + 1] = (struct pollfd){fds[i], POLLIN, 0};
        if (poll(p, (nfds_t)n + 1, 50) <= 0)
            continue;
        for (int i = n - 1; i >= 0; i--) {
            char buf[4096];

            if (p[i + 1].revents == 0)
                continue;
            if (recv(fds[i], buf, sizeof buf, 0) > 0) {
                (void)send(fds[i], LIE, strlen(LIE), MSG_NOSIGNAL);
            } else { /* the client left */
                close(fds[i]);
                fds[i] = fds[--n];
            }
        }
        if ((p[0].revents & POLLIN) && n < LIAR_CONNS) {
            int fd = accept(l->lfd, NULL, NULL);

            if (fd >= 0)
                fds[n++] = fd;
        }
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return NULL;
}

/* hiredis reserves what a reply's "*<count>" claims before the elements
 * arrive; libdlock caps the count (reader.c), so the lie is refused at once
 * as a broken stream instead of reserving 800 MB and waiting out the
 * command timeout. The two honest masters still grant the lock. */
Test(lock_sick, one_of_three_announces_a_huge_reply, .timeout = 60)
{
    redis_proc set[3];
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    liar lr = {.stop = 0};
    int port;

    lr.lfd = tarpit_listen(&port);
    cr_assert_eq(pthread_create(&lr.th, NULL, liar_run, &lr), 0);
    memcpy(set, nodes, 2 * sizeof set[0]);
    memset(&set[2], 0, sizeof set[2]);
    snprintf(set[2].addr, sizeof set[2].addr, "127.0.0.1:%d", port);

    tc_options(&o, &a, set, 3);
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(c, "lie", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_client_free(c);

    c = NULL;
    tc_options(&o, &a, &set[2], 1);
    o.command_timeout_ms = 2000; /* a wait for elements would show as a timeout */
    if (dlock_client_new(&o, &c, NULL, 0) == DLOCK_OK) {
        dlock_err e = dlock_try_acquire(c, "lie", 5000, &l);
        const char *why = TC_ERR(c);

        /* A stream that makes no sense is a broken connection: unreachable. */
        cr_assert_eq(e, DLOCK_ERR_UNREACHABLE, "%s: %s", dlock_strerror(e), why);
        /* hiredis 1.x says "out of range"; 0.14's wrapped reader, "Out of memory". */
        cr_assert(strstr(why, "out of range") != NULL || strstr(why, "Out of memory") != NULL,
                  "not refused by the reader: %s", why);
        dlock_client_free(c);
    }
    atomic_store(&lr.stop, 1);
    cr_assert_eq(pthread_join(lr.th, NULL), 0);
    close(lr.lfd);
}
