/* lock_stress.c - the libdlock threading paths as one plain program (no
 * Criterion: its sandbox cannot start under ThreadSanitizer, upstream
 * Snaipe/Criterion#274), so the TSan build can check them. The paths: one
 * client shared by many threads, the watchdog racing release / free /
 * client_free, on_lost callbacks, stats snapshots, a node killed under
 * contention, and kept locks (cache.c) handed between clients and threads.
 * Exits 0 when every check holds; prints each failed check otherwise. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lock_common.h"
#include "stress.h"

int stress_failures;

#define NODES 3
static redis_proc nodes[NODES];
static redis_proc counter;

typedef struct shared_arg {
    dlock_client *c; /* shared by all threads, or NULL: make one per thread */
    int iters;
    int cache;       /* keep each lock after its section (cache.c) and reuse it */
    int bad;         /* acquisitions or releases that failed */
    uint64_t last_fence_seen;
} shared_arg;

static dlock_client *patient_client(int cache)
{
    dlock_options o;
    tc_addrs hold;
    dlock_client *c = NULL;

    tc_options(&o, &hold, nodes, NODES);
    o.command_timeout_ms = 2000; /* TSan makes everything slow */
    o.retry_unavailable = 1;
    o.cache_locks = cache;
    return dlock_client_new(&o, &c, NULL, 0) == DLOCK_OK ? c : NULL;
}

/* Non-atomic increment under the lock, as in tests/lock/mutex.c. */
static void *contend(void *p)
{
    shared_arg *s = p;
    int bad = 0;
    dlock_client *own = s->c ? NULL : patient_client(s->cache);
    dlock_client *c = s->c ? s->c : own;
    redisContext *rc = redisConnect("127.0.0.1", counter.port);
    if (!c || !rc || rc->err) {
        bad = s->iters;
        goto out;
    }
    for (int i = 0; i < s->iters; i++) {
        dlock_lock *l = s->cache ? dlock_reuse(c, "stress", 5000) : NULL;
        dlock_err e = l != NULL ? DLOCK_OK : dlock_acquire(c, "stress", 10000, dlock_now_ms() + 30000, &l);
        if (e != DLOCK_OK) {
            bad++;
            continue;
        }
        redisReply *r = redisCommand(rc, "GET counter");
        long long v = (r && r->type == REDIS_REPLY_STRING) ? atoll(r->str) : 0;
        freeReplyObject(r);
        r = redisCommand(rc, "SET counter %lld", v + 1);
        freeReplyObject(r);
        if (s->cache) {
            /* The client owns it now: kept, or handed to a waiter. */
            e = dlock_keep(c, l, 200);
            if (e != DLOCK_OK && !dlock_err_is_unavailable(e))
                bad++;
            continue;
        }
        e = dlock_release(c, l);
        if (e != DLOCK_OK && !dlock_err_is_unavailable(e))
            bad++;
        dlock_lock_free(l);
    }
out:
    if (rc)
        redisFree(rc);
    dlock_client_free(own);
    __atomic_add_fetch(&s->bad, bad, __ATOMIC_SEQ_CST);
    return NULL;
}

static void reset_counter(void)
{
    char out[16];
    const char *del[] = {"DEL", "counter"};
    tc_cmd(&counter, out, sizeof out, 2, del);
}

static void run_contention(int shared, int threads, int iters, int kill_node, int cache)
{
    pthread_t th[8];
    shared_arg s = {.iters = iters, .cache = cache};
    reset_counter();
    if (shared)
        s.c = patient_client(cache);
    for (int t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, contend, &s);
    if (kill_node) {
        test_sleep_ms(300);
        CHECK(redis_kill(&nodes[2]) == 0, "kill");
        test_sleep_ms(300);
        CHECK(redis_restart(&nodes[2]) == 0, "restart");
    }
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    CHECK(s.bad == 0, "%d failed calls (shared=%d)", s.bad, shared);
    CHECK(tc_get_ll(&counter, "counter") == (long long)threads * iters, "counter %lld, want %d",
          tc_get_ll(&counter, "counter"), threads * iters);
    dlock_client_free(s.c);
}

/* Readers poll every accessor while the watchdog renews. */
typedef struct watcher {
    dlock_lock *l;
    atomic_int stop;
    int held_drops;
} watcher;

static void *watch(void *p)
{
    watcher *w = p;
    while (!atomic_load(&w->stop)) {
        if (!dlock_is_held(w->l))
            w->held_drops++;
        (void)dlock_lock_validity_ms(w->l);
        (void)dlock_lock_valid_until_ms(w->l);
        (void)dlock_lock_renewals(w->l);
        usleep(500);
    }
    return NULL;
}

static void renewal_with_readers(void)
{
    dlock_client *c = patient_client(0);
    dlock_lock *ls[4] = {0};
    watcher w[4];
    pthread_t th[4];
    tc_lost lost;
    char name[4][16];
    tc_lost_init(&lost);
    for (int i = 0; i < 4; i++) {
        snprintf(name[i], sizeof name[i], "renew%d", i);
        CHECK(dlock_try_acquire(c, name[i], 900, &ls[i]) == DLOCK_OK, "acquire %d", i);
        dlock_renew_options ro = {.on_lost = tc_on_lost, .user = &lost};
        CHECK(dlock_auto_renew(c, ls[i], &ro) == DLOCK_OK, "auto_renew %d", i);
        w[i] = (watcher){.l = ls[i]};
        pthread_create(&th[i], NULL, watch, &w[i]);
    }
    for (int k = 0; k < 20; k++) {
        dlock_stats st;
        dlock_client_stats(c, &st);
        /* Read the whole text while the workers write it: a race TSan sees
         * unless the copy is taken under the client's mutex. */
        char err[DLOCK_ERRSTR_LEN];
        (void)strlen(dlock_client_errstr(c, err, sizeof err));
        test_sleep_ms(100);
    }
    for (int i = 0; i < 4; i++) {
        atomic_store(&w[i].stop, 1);
        pthread_join(th[i], NULL);
        CHECK(w[i].held_drops == 0, "lock %d dropped while renewed", i);
        CHECK(dlock_lock_renewals(ls[i]) >= 3, "lock %d renewed %u times", i,
              dlock_lock_renewals(ls[i]));
        CHECK(dlock_release(c, ls[i]) == DLOCK_OK, "release %d", i);
        dlock_lock_free(ls[i]);
    }
    CHECK(tc_lost_wait(&lost, 1, NULL) == 0, "on_lost called after clean releases");
    tc_lost_destroy(&lost);
    dlock_client_free(c);
}

/* The watchdog is due every ~30 ms; free, release and client_free race it. */
static void watchdog_races(void)
{
    for (int round = 0; round < 30; round++) {
        dlock_client *c = patient_client(0);
        dlock_lock *a = NULL, *b = NULL, *d = NULL;
        char ra[32], rb[32], rd[32];
        /* Fresh names: a and d are left to expire, not released. */
        snprintf(ra, sizeof ra, "race-a%d", round);
        snprintf(rb, sizeof rb, "race-b%d", round);
        snprintf(rd, sizeof rd, "race-d%d", round);
        CHECK(dlock_try_acquire(c, ra, 90, &a) == DLOCK_OK, "acquire a");
        CHECK(dlock_try_acquire(c, rb, 90, &b) == DLOCK_OK, "acquire b");
        CHECK(dlock_try_acquire(c, rd, 90, &d) == DLOCK_OK, "acquire d");
        dlock_renew_options ro = {0};
        dlock_auto_renew(c, a, &ro);
        dlock_auto_renew(c, b, &ro);
        dlock_auto_renew(c, d, &ro);
        test_sleep_ms(round % 40);
        dlock_lock_free(a);      /* renewal must stop first */
        CHECK(dlock_release(c, b) == DLOCK_OK, "release b");
        dlock_lock_free(b);
        dlock_client_free(c);    /* watchdog stopped while d is registered */
        dlock_lock_free(d);      /* handle outlives its client */
    }
}

static void lost_by_delete(void)
{
    dlock_client *c = patient_client(0);
    dlock_lock *l = NULL;
    tc_lost lost;
    dlock_err why = DLOCK_OK;
    char out[16];
    const char *del[] = {"DEL", "lock:gone"};
    tc_lost_init(&lost);
    CHECK(dlock_try_acquire(c, "gone", 900, &l) == DLOCK_OK, "acquire");
    dlock_renew_options ro = {.on_lost = tc_on_lost, .user = &lost};
    dlock_auto_renew(c, l, &ro);
    for (size_t i = 0; i < NODES; i++)
        tc_cmd(&nodes[i], out, sizeof out, 2, del);
    CHECK(tc_lost_wait(&lost, 3000, &why) == 1, "on_lost not called once");
    CHECK(why == DLOCK_ERR_LOST, "on_lost with %s", dlock_strerror(why));
    CHECK(dlock_is_held(l) == 0, "still held");
    dlock_lock_free(l);
    dlock_client_free(c);
    tc_lost_destroy(&lost);
}

/* on_lost reads the lock after the holder saw dlock_is_held() turn 0 and
 * freed it: dlock_lock_free must wait for the callback (TSan and ASan see
 * the free racing the read otherwise). */
static void read_lock_late(const dlock_lock *lock, dlock_err why, void *user)
{
    (void)why;
    test_sleep_ms(20);
    atomic_fetch_add((_Atomic size_t *)user, strlen(dlock_lock_resource(lock)));
}

static void free_while_on_lost_runs(void)
{
    _Atomic size_t seen = 0;
    char out[16];
    for (int round = 0; round < 5; round++) {
        dlock_client *c = patient_client(0);
        dlock_lock *l = NULL;
        const char *del[] = {"DEL", "lock:free-race"};
        CHECK(dlock_try_acquire(c, "free-race", 300, &l) == DLOCK_OK, "acquire");
        dlock_renew_options ro = {.on_lost = read_lock_late, .user = &seen};
        dlock_auto_renew(c, l, &ro);
        for (size_t i = 0; i < NODES; i++)
            tc_cmd(&nodes[i], out, sizeof out, 2, del);
        int64_t until = dlock_now_ms() + 2000;
        while (dlock_is_held(l) && dlock_now_ms() < until)
            test_sleep_ms(1);
        dlock_lock_free(l);
        dlock_client_free(c);
    }
    CHECK(atomic_load(&seen) == 5 * strlen("free-race"), "on_lost read %zu bytes",
          (size_t)atomic_load(&seen));
}

int main(void)
{
    if (tc_nodes_up(nodes, NODES, 0) != 0 || tc_nodes_up(&counter, 1, 0) != 0) {
        redis_stop_n(nodes, NODES);
        return 2;
    }
    run_contention(1, 4, 60, 0, 0);
    run_contention(0, 4, 60, 0, 0);
    run_contention(1, 4, 60, 1, 0);
    /* Lock caching: kept locks handed between clients and between the
     * threads of one client, the counter still exact. */
    run_contention(0, 4, 60, 0, 1);
    run_contention(1, 4, 60, 0, 1);
    renewal_with_readers();
    watchdog_races();
    lost_by_delete();
    free_while_on_lost_runs();
    redis_stop_n(nodes, NODES);
    redis_stop(&counter);
    if (stress_failures)
        fprintf(stderr, "lock_stress: %d checks failed\n", stress_failures);
    return stress_failures ? 1 : 0;
}
