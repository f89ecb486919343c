/* sentinel.c - a node given as sentinel://:
 *   - the master is found through a real Redis Sentinel;
 *   - a failover is followed by the same client;
 *   - a stale answer naming a replica is refused by the ROLE check;
 *   - nothing hangs when the sentinels are wrong or gone.
 * And the hazard that remains: Redis replicates asynchronously, so a
 * failover can lose a lock (two holders) and move its fence counter back
 * (docs/sentinel.md).
 *
 * Every test starts its own master, replica (--replicaof) and sentinel
 * (quorum 1, down-after 500 ms) on free loopback ports, and stops them by
 * PID: a failover changes them for good. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

/* dlock_try_acquire from a thread of its own (a lock held by the calling
 * thread is refused as not reentrant; another thread is told the truth). */
typedef struct try_arg {
    dlock_client *c;
    const char *res;
    dlock_lock **out;
    dlock_err rc;
} try_arg;

static void *try_from_thread(void *arg)
{
    try_arg *t = arg;

    t->rc = dlock_try_acquire(t->c, t->res, 1000, t->out);
    return NULL;
}

#define NAME "m"
#define DOWN_AFTER_MS 500
#define FAILOVER_TIMEOUT_MS 3000
#define CONNECT_MS 200
#define COMMAND_MS 200
/* A failover takes down-after + a random start delay (up to 1 s) + the
 * promotion and Sentinel's next INFO (1 s while failing over): bounded
 * generously for a loaded 2-core machine. */
#define FAILOVER_WAIT_MS 30000

static redis_proc master, replica, other;
static sentinel_proc sent;
static int sent_paused; /* resumed by .fini when a test failed while it was paused */

static void stop_all(void)
{
    if (replica.paused)
        redis_resume(&replica);
    if (sent_paused)
        sentinel_resume(&sent);
    sent_paused = 0;
    sentinel_stop(&sent);
    redis_stop(&replica);
    redis_stop(&master);
    redis_stop(&other);
}

static int info_has(const redis_proc *r, const char *what)
{
    const char *argv[2] = {"INFO", "replication"};
    char out[4096];

    tc_cmd(r, out, sizeof out, 2, argv);
    return strstr(out, what) != NULL;
}

/* Bounded wait until pred(arg) holds; 1 when it did. */
static int wait_until(int (*pred)(const void *), const void *arg, int64_t timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;

    while (test_now_ms() < end) {
        if (pred(arg))
            return 1;
        test_sleep_ms(50);
    }
    return pred(arg);
}

static int link_up(const void *r)
{
    return info_has(r, "master_link_status:up");
}

/* The port the sentinel names for NAME now, or -1. */
static int sentinel_says(void)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", NAME};
    char out[128];
    const char *nl;

    if (sentinel_cmd(&sent, out, sizeof out, 3, argv) != 0 || (nl = strchr(out, '\n')) == NULL)
        return -1;
    return atoi(nl + 1);
}

static int sentinel_names_replica(const void *unused)
{
    (void)unused;
    return sentinel_says() == replica.port;
}

/* Sentinel learns the replicas from the master's INFO: a failover can only
 * promote one it knows, with a live link. */
static int sentinel_knows_replica(const void *unused)
{
    const char *argv[3] = {"SENTINEL", "replicas", NAME};
    char out[4096], want[64];

    (void)unused;
    snprintf(want, sizeof want, "127.0.0.1:%d", replica.port);
    return sentinel_cmd(&sent, out, sizeof out, 3, argv) == 0 && strstr(out, want) != NULL &&
           strstr(out, "master-link-status\nok") != NULL;
}

static void start_all(void)
{
    memset(&master, 0, sizeof master);
    memset(&replica, 0, sizeof replica);
    memset(&other, 0, sizeof other);
    memset(&sent, 0, sizeof sent);
    cr_assert_eq(redis_start(&master), 0, "master did not start");
    replica.replicaof_port = master.port;
    cr_assert_eq(redis_start(&replica), 0, "replica did not start");
    cr_assert(wait_until(link_up, &replica, 10000), "replica never synced with the master");
    cr_assert_eq(sentinel_start(&sent, NAME, master.port, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS), 0,
                 "sentinel did not start");
    cr_assert_eq(sentinel_says(), master.port);
}

TestSuite(lock_sentinel, .init = start_all, .fini = stop_all);

/* A client whose one node is the sentinel:// address addr. */
static dlock_client *client_on(const char *addr)
{
    dlock_options o;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    dlock_options_init(&o);
    o.addrs = (const char *const[]){addr};
    o.n_addrs = 1;
    o.connect_timeout_ms = CONNECT_MS;
    o.command_timeout_ms = COMMAND_MS;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    return c;
}

static void sentinel_addr(char *out, size_t len, const char *name)
{
    snprintf(out, len, "sentinel://%s/%s", sent.addr, name);
}

/* GET of res's lock / fence key on r. */
static void lock_value(const redis_proc *r, const char *res, char *out, size_t len)
{
    char key[TC_KEY_LEN];

    tc_get(r, tc_lock_key(key, res), out, len);
}

static long long fence_value(const redis_proc *r, const char *res)
{
    char key[TC_KEY_LEN];

    return tc_get_ll(r, tc_fence_key(key, res));
}

Test(lock_sentinel, acquire_release_extend_on_the_master, .timeout = 60)
{
    char addr[256], val[64];
    int dead = free_loopback_port();
    dlock_lock *l = NULL;
    dlock_client *c;

    /* The first sentinel is down: the next one in the list answers. */
    snprintf(addr, sizeof addr, "sentinel://127.0.0.1:%d,%s/%s", dead, sent.addr, NAME);
    c = client_on(addr);
    cr_assert_eq(dlock_client_nodes(c), 1, "one sentinel:// address is one node");
    cr_assert_eq(dlock_try_acquire(c, "s1", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    lock_value(&master, "s1", val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(l), "the key is not on the master");
    cr_assert_eq(fence_value(&master, "s1"), (long long)dlock_lock_fence(l));
    cr_assert_eq(dlock_extend(c, l, 30000), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_gt(tc_pttl(&master, "s1"), 20000, "the extend did not reach the master");
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_exists(&master, "s1"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_sentinel, unknown_name_or_no_sentinel_is_unavailable_in_time, .timeout = 60)
{
    char addr[256];
    dlock_lock *l = (dlock_lock *)0x1;
    dlock_client *c;
    int64_t t0;
    size_t up = 99;

    /* A name the sentinel does not monitor. */
    sentinel_addr(addr, sizeof addr, "nosuchmaster");
    c = client_on(addr);
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "s2", 5000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_leq(dlock_now_ms() - t0, CONNECT_MS + COMMAND_MS + 500);
    cr_assert_null(l);
    cr_assert(strstr(TC_ERR(c), "does not know master 'nosuchmaster'") != NULL, "%s", TC_ERR(c));
    cr_assert(dlock_err_is_unavailable(dlock_ping(c, &up)));
    cr_assert_eq(up, 0);
    dlock_client_free(c);

    /* Every sentinel down (nothing listens there). */
    snprintf(addr, sizeof addr, "sentinel://127.0.0.1:%d,127.0.0.1:%d/%s", free_loopback_port(),
             free_loopback_port(), NAME);
    c = client_on(addr);
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "s2", 5000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_leq(dlock_now_ms() - t0, 2 * (CONNECT_MS + COMMAND_MS) + 500);
    cr_assert(strstr(TC_ERR(c), "sentinel: no master 'm'") != NULL, "%s", TC_ERR(c));
    dlock_client_free(c);

    /* A paused sentinel (accepts, never answers) costs at most one connect
     * and one command timeout, not a hang. The client is made first: its
     * own first connect would ask the paused sentinel too. */
    sentinel_addr(addr, sizeof addr, NAME);
    c = client_on(addr);
    cr_assert_eq(dlock_try_acquire(c, "s2", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;
    cr_assert_eq(sentinel_pause(&sent), 0);
    sent_paused = 1;
    cr_assert_eq(redis_kill(&master), 0); /* the client must reconnect, so ask */
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "s2", 5000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_leq(dlock_now_ms() - t0, CONNECT_MS + COMMAND_MS + 500);
    cr_assert(strstr(TC_ERR(c), "sentinel") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(sentinel_resume(&sent), 0);
    sent_paused = 0;
    dlock_client_free(c);
}

Test(lock_sentinel, failover_is_followed_by_the_same_client, .timeout = 90)
{
    char addr[256], val[64];
    dlock_lock *l = NULL;
    dlock_client *c;

    cr_assert(wait_until(sentinel_knows_replica, NULL, 15000), "sentinel never saw the replica");
    sentinel_addr(addr, sizeof addr, NAME);
    c = client_on(addr);
    cr_assert_eq(dlock_try_acquire(c, "s3", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;

    cr_assert_eq(redis_kill(&master), 0);
    cr_assert(wait_until(sentinel_names_replica, NULL, FAILOVER_WAIT_MS),
              "sentinel did not promote the replica (it names port %d)", sentinel_says());
    /* No restart, no new client: the dead connection is dropped and the
     * reconnect asks the sentinel, which now names the promoted replica. */
    cr_assert_eq(dlock_try_acquire(c, "s3", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    lock_value(&replica, "s3", val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(l), "the key is not on the new master");
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_exists(&replica, "s3"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int fence_replicated(const void *want)
{
    return fence_value(&replica, "s4") == *(const long long *)want;
}

/* The documented hazard, on purpose: the lock's key never reaches the
 * replica (its link is cut while it is stopped, so nothing sits in its
 * socket either), the master dies, the replica is promoted without the key
 * - and a second client acquires the lock the first still holds. */
Test(lock_sentinel, failover_can_lose_a_lock, .timeout = 90)
{
    char addr[256], out[64];
    const char *kill_link[3] = {"CLIENT", "KILL", "TYPE"};
    const char *kill_argv[4] = {kill_link[0], kill_link[1], kill_link[2], "replica"};
    dlock_lock *a = NULL, *b = NULL;
    dlock_client *ca, *cb;
    long long one = 1;

    cr_assert(wait_until(sentinel_knows_replica, NULL, 15000), "sentinel never saw the replica");
    sentinel_addr(addr, sizeof addr, NAME);
    ca = client_on(addr);
    /* Fence 1 reaches the replica: the counter both masters start from. */
    cr_assert_eq(dlock_try_acquire(ca, "s4", 60000, &a), DLOCK_OK, "%s", TC_ERR(ca));
    cr_assert_eq(dlock_release(ca, a), DLOCK_OK);
    dlock_lock_free(a);
    cr_assert(wait_until(fence_replicated, &one, 5000), "fence 1 never replicated");

    /* Cut replication deterministically: stop the replica, then have the
     * master drop its link; what the master takes from now on is its own. */
    cr_assert_eq(redis_pause(&replica), 0);
    tc_cmd(&master, out, sizeof out, 4, kill_argv);
    cr_assert_str_eq(out, "1", "the master had no replica link to cut");
    cr_assert_eq(dlock_try_acquire(ca, "s4", 60000, &a), DLOCK_OK, "%s", TC_ERR(ca));
    cr_assert_eq(dlock_release(ca, a), DLOCK_OK);
    dlock_lock_free(a);
    cr_assert_eq(dlock_try_acquire(ca, "s4", 60000, &a), DLOCK_OK, "%s", TC_ERR(ca));
    cr_assert_eq(dlock_lock_fence(a), 3);
    cr_assert_eq(fence_value(&master, "s4"), 3);

    cr_assert_eq(redis_kill(&master), 0);
    cr_assert_eq(redis_resume(&replica), 0);
    cr_assert(wait_until(sentinel_names_replica, NULL, FAILOVER_WAIT_MS),
              "sentinel did not promote the replica (it names port %d)", sentinel_says());

    cb = client_on(addr);
    cr_assert_eq(dlock_try_acquire(cb, "s4", 60000, &b), DLOCK_OK,
                 "the promoted replica had the key after all: %s", TC_ERR(cb));
    /* Two holders: a still believes it holds (its validity is its own
     * clock's), b holds on the new master. */
    cr_assert_eq(dlock_is_held(a), 1);
    cr_assert_eq(dlock_is_held(b), 1);
    /* And the fence went backwards: the new master's counter stopped at 1,
     * so b gets 2, below a's 3. Only a store that keeps the highest fence
     * it accepted (db/: the coupon's fence column) refuses b's writes. */
    cr_assert_eq(dlock_lock_fence(b), 2);
    cr_assert_lt(dlock_lock_fence(b), dlock_lock_fence(a));
    /* a's client follows the failover too: it sees b's key and is refused
     * (from another thread: a's own thread would be told it holds s4
     * already, which by its own clock it does). */
    {
        dlock_lock *again = (dlock_lock *)0x1;
        pthread_t th;
        try_arg t = {ca, "s4", &again, DLOCK_ERR_ARG};

        cr_assert_eq(pthread_create(&th, NULL, try_from_thread, &t), 0);
        cr_assert_eq(pthread_join(th, NULL), 0);
        cr_assert_eq(t.rc, DLOCK_ERR_TAKEN, "%s", TC_ERR(ca));
        cr_assert_null(again);
    }
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(ca);
    dlock_client_free(cb);
}

static int is_replica(const void *r)
{
    return info_has(r, "role:slave") && info_has(r, "master_link_status:up");
}

/* The master turns into a replica of another instance while the sentinel
 * still names it (a stale answer). The kept connection is dropped at the
 * first -READONLY. The reconnect asks the sentinel and refuses what it
 * names, because ROLE says replica - even where the replica would accept
 * writes. */
Test(lock_sentinel, stale_answer_refused_by_role, .timeout = 60)
{
    char addr[256], port[16], val[64];
    const char *replicaof[3] = {"REPLICAOF", "127.0.0.1", port};
    const char *writable[4] = {"CONFIG", "SET", "replica-read-only", "no"};
    dlock_lock *l = NULL;
    dlock_client *c, *fresh;
    dlock_err e;

    cr_assert_eq(redis_start(&other), 0);
    sentinel_addr(addr, sizeof addr, NAME);
    c = client_on(addr);
    cr_assert_eq(dlock_try_acquire(c, "s5", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;

    snprintf(port, sizeof port, "%d", other.port);
    tc_cmd(&master, val, sizeof val, 3, replicaof);
    cr_assert_str_eq(val, "OK");
    cr_assert(wait_until(is_replica, &master, 10000), "the old master never became a replica");
    cr_assert_eq(sentinel_says(), master.port, "the sentinel already moved on");

    /* The kept connection writes to a replica now: -READONLY. */
    e = dlock_try_acquire(c, "s5", 10000, &l);
    cr_assert_eq(e, DLOCK_ERR_PROTOCOL, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert(strstr(TC_ERR(c), "READONLY") != NULL, "%s", TC_ERR(c));
    /* That dropped the connection: the next call re-resolves, and the ROLE
     * check refuses the sentinel's stale answer. */
    e = dlock_try_acquire(c, "s5", 10000, &l);
    cr_assert_eq(e, DLOCK_ERR_UNREACHABLE, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert(strstr(TC_ERR(c), "ROLE says slave") != NULL, "%s", TC_ERR(c));
    cr_assert_null(l);

    /* A replica that accepts writes would take the lock - and lose it at
     * its next sync. A new client must not write there either. */
    tc_cmd(&master, val, sizeof val, 4, writable);
    cr_assert_str_eq(val, "OK");
    fresh = client_on(addr);
    e = dlock_try_acquire(fresh, "s5", 10000, &l);
    cr_assert_eq(e, DLOCK_ERR_UNREACHABLE, "%s: %s", dlock_strerror(e), TC_ERR(fresh));
    cr_assert(strstr(TC_ERR(fresh), "ROLE says slave") != NULL, "%s", TC_ERR(fresh));
    cr_assert_eq(tc_exists(&master, "s5"), 0, "a lock was written to a replica");
    dlock_client_free(fresh);
    dlock_client_free(c);
}

/* The client's password is the master's: the ROLE check and the node's
 * connection authenticate with it; the sentinels are asked without it. */
Test(lock_sentinel, password_is_for_the_master, .timeout = 60)
{
    redis_proc locked = {0};
    sentinel_proc s2 = {0};
    char addr[256], val[64];
    dlock_options o;
    dlock_client *c = NULL, *nopass;
    dlock_lock *l = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    snprintf(locked.password, sizeof locked.password, "s3cret");
    cr_assert_eq(redis_start(&locked), 0);
    /* Sentinel names a master it has not authenticated to (no auth-pass):
     * it answers from its configuration. */
    cr_assert_eq(sentinel_start(&s2, "pm", locked.port, 5000, 10000), 0);
    snprintf(addr, sizeof addr, "sentinel://%s/pm", s2.addr);
    dlock_options_init(&o);
    o.addrs = (const char *const[]){addr};
    o.n_addrs = 1;
    o.password = "s3cret";
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "s6", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    lock_value(&locked, "s6", val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(l));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;
    dlock_client_free(c);

    /* Without the password the master refuses the check: unavailable, and
     * the reason says so. */
    nopass = client_on(addr);
    cr_assert_eq(dlock_try_acquire(nopass, "s6", 10000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert(strstr(TC_ERR(nopass), "NOAUTH") != NULL, "%s", TC_ERR(nopass));
    cr_assert_null(l);
    dlock_client_free(nopass);
    sentinel_stop(&s2);
    redis_stop(&locked);
}
