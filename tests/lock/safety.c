/* safety.c - the handle never claims more than the nodes hold:
 *   - a partly failed shortening extend shortens the validity;
 *   - a partly failed release ends the hold;
 *   - a second release sends nothing;
 *   - locks are tied to their client;
 *   - duplicate nodes are refused;
 *   - lock and fence keys never collide;
 *   - a failed fence sync says so.
 * (Renewal safety: tests/lock/lost.c.) */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

#define NODES 3
#define CMD_TIMEOUT 100
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_safety, .init = tc_suite_init, .fini = tc_suite_fini);

static void pause_1_and_2(void)
{
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    cr_assert_eq(redis_pause(&nodes[2]), 0);
}

static void resume_1_and_2(void)
{
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_resume(&nodes[2]), 0);
}

/* Every script once on every node: a command that a paused node runs late
 * must find its script cached, else it fails there with NOSCRIPT (nobody is
 * left to resend it in full) and the test would show nothing. */
static void warm_scripts(dlock_client *c)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, "warm", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_extend(c, l, 5000), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(l);
}

static uint64_t round_trips(dlock_client *c)
{
    dlock_stats s;
    dlock_client_stats(c, &s);
    return s.round_trips;
}

/* A partly failed extend to a TTL shorter than the validity left must
 * shorten the validity. The PEXPIREs that run (node 0 at once, nodes 1 and
 * 2 late, on resume) let the keys expire sooner. A handle that kept the
 * old validity would say held while a second client acquires. */
Test(lock_safety, failed_shortening_extend_shortens_validity, .timeout = 20)
{
    const uint32_t short_ttl = 300;
    dlock_client *a = tc_client(nodes, NODES, CMD_TIMEOUT);
    dlock_client *b = tc_client(nodes, NODES, CMD_TIMEOUT);
    dlock_lock *la = NULL, *lb = NULL;
    warm_scripts(a);
    cr_assert_eq(dlock_try_acquire(a, "shx", 10000, &la), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(tc_wait_holding(nodes, NODES, "shx", NODES, TC_SETTLE_MS), NODES);

    pause_1_and_2();
    int64_t t0 = dlock_now_ms();
    dlock_err e = dlock_extend(a, la, short_ttl);
    cr_assert(dlock_err_is_unavailable(e), "extend with 2 of 3 paused: %s", dlock_strerror(e));
    /* min(old end, start + ttl - drift): the start is after t0. */
    cr_expect_leq(dlock_lock_valid_until_ms(la), dlock_now_ms() + short_ttl,
                  "validity %lld ms left after extending to %u ms",
                  (long long)(dlock_lock_valid_until_ms(la) - t0), short_ttl);
    resume_1_and_2();

    /* Every key expires within short_ttl of the resume; b gets the lock then,
     * and at that moment a must already know it does not hold it. */
    int64_t until = dlock_now_ms() + short_ttl + 2000;
    while ((e = dlock_try_acquire(b, "shx", 5000, &lb)) != DLOCK_OK && dlock_now_ms() < until)
        test_sleep_ms(5);
    int held = dlock_is_held(la);
    cr_assert_eq(e, DLOCK_OK, "b never acquired: %s", TC_ERR(b));
    cr_assert_eq(held, 0, "b acquired while a's handle said held (%lld ms left)",
                 (long long)dlock_lock_validity_ms(la));
    cr_assert_eq(dlock_release(b, lb), DLOCK_OK);
    dlock_lock_free(lb);
    dlock_lock_free(la);
    dlock_client_free(a);
    dlock_client_free(b);
}

/* The clean success is the other half of the rule: the validity is then
 * exactly start + ttl - drift, shorter or longer than before. */
Test(lock_safety, clean_shortening_extend_sets_new_validity, .timeout = 10)
{
    dlock_client *a = tc_client(nodes, NODES, 0);
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(a, "shok", 10000, &l), DLOCK_OK);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_extend(a, l, 1000), DLOCK_OK, "%s", TC_ERR(a));
    int64_t t1 = dlock_now_ms();
    const int64_t drift = 1000 / 100 + 2;
    cr_assert_geq(dlock_lock_valid_until_ms(l), t0 + 1000 - drift);
    cr_assert_leq(dlock_lock_valid_until_ms(l), t1 + 1000 - drift);
    cr_assert_eq(dlock_release(a, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(a);
}

/* A release that too few nodes answered ends the hold all the same: its
 * deletes can still land (they do, on resume). */
Test(lock_safety, failed_release_is_not_held, .timeout = 15)
{
    dlock_client *a = tc_client(nodes, NODES, CMD_TIMEOUT);
    dlock_client *b = tc_client(nodes, NODES, CMD_TIMEOUT);
    dlock_lock *la = NULL, *lb = NULL;
    warm_scripts(a);
    cr_assert_eq(dlock_try_acquire(a, "rel", 10000, &la), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(tc_wait_holding(nodes, NODES, "rel", NODES, TC_SETTLE_MS), NODES);
    pause_1_and_2();
    dlock_err e = dlock_release(a, la);
    cr_assert(dlock_err_is_unavailable(e), "release with 2 of 3 paused: %s", dlock_strerror(e));
    cr_assert_eq(dlock_is_held(la), 0, "handle still held after its deletes were sent");
    cr_assert_eq(dlock_lock_validity_ms(la), 0);
    /* Not revived by an extend either. */
    cr_assert_eq(dlock_extend(a, la, 10000), DLOCK_ERR_LOST);
    resume_1_and_2();
    /* The deletes land late, and the next owner gets the lock at once. */
    cr_assert_eq(tc_wait_holding(nodes, NODES, "rel", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(dlock_try_acquire(b, "rel", 5000, &lb), DLOCK_OK, "%s", TC_ERR(b));
    cr_assert_eq(dlock_release(b, lb), DLOCK_OK);
    dlock_lock_free(lb);
    dlock_lock_free(la);
    dlock_client_free(a);
    dlock_client_free(b);
}

/* A second release sends nothing: its deletes would find the first ones
 * done and answer LOST (telling the caller its section may have run
 * unprotected). */
Test(lock_safety, release_twice_is_arg_without_a_round_trip, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    dlock_lock *l = NULL;
    char why[DLOCK_ERRSTR_LEN];
    cr_assert_eq(dlock_try_acquire(c, "twice", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    uint64_t r0 = round_trips(c);
    dlock_stats s0, s1;
    dlock_client_stats(c, &s0);
    cr_assert_eq(dlock_release(c, l), DLOCK_ERR_ARG);
    cr_assert_eq(round_trips(c), r0, "the second release went to the network");
    dlock_client_stats(c, &s1);
    cr_assert_eq(s1.lost, s0.lost);
    cr_assert(strstr(dlock_client_errstr(c, why, sizeof why), "already released") != NULL, "%s",
              why);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Another client's release / extend / auto_renew is refused: it would use
 * ITS nodes and key prefix, and with prefix "b:" the release would find
 * "not our token" and mark a healthy lock LOST. */
Test(lock_safety, lock_of_another_client_is_refused, .timeout = 10)
{
    dlock_options o;
    tc_addrs addrs;
    dlock_client *a = tc_client(nodes, 1, 0), *b = NULL;
    dlock_lock *l = NULL;
    dlock_renew_options ro = {0};
    char why[DLOCK_ERRSTR_LEN];
    tc_options(&o, &addrs, nodes, 1);
    o.key_prefix = "b:";
    cr_assert_eq(dlock_client_new(&o, &b, NULL, 0), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(a, "own", 5000, &l), DLOCK_OK);
    uint64_t r0 = round_trips(b);
    cr_assert_eq(dlock_release(b, l), DLOCK_ERR_ARG);
    cr_assert(strstr(dlock_client_errstr(b, why, sizeof why), "another client") != NULL, "%s",
              why);
    cr_assert_eq(dlock_extend(b, l, 5000), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_auto_renew(b, l, &ro), DLOCK_ERR_ARG);
    cr_assert_eq(round_trips(b), r0, "another client's call went to the network");
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_eq(tc_exists(&nodes[0], "own"), 1);
    /* Its own client still can. */
    cr_assert_eq(dlock_release(a, l), DLOCK_OK);
    cr_assert_eq(tc_exists(&nodes[0], "own"), 0);
    dlock_lock_free(l);
    dlock_client_free(a);
    dlock_client_free(b);
}

static dlock_err new_client_on(const char *const *addrs, size_t n, char *why, size_t len)
{
    dlock_options o;
    dlock_client *c = (dlock_client *)0x1;
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = n;
    dlock_err e = dlock_client_new(&o, &c, why, len);
    if (e == DLOCK_OK)
        dlock_client_free(c);
    else
        cr_assert_null(c);
    return e;
}

/* "a,a,b" is refused: node a alone would be a quorum of two. */
Test(lock_safety, duplicate_nodes_are_refused, .timeout = 10)
{
    char a[64], a0[64], why[DLOCK_ERRSTR_LEN];
    snprintf(a, sizeof a, "127.0.0.1:%d", nodes[0].port);
    snprintf(a0, sizeof a0, "127.0.0.1:0%d", nodes[0].port); /* same port after parsing */
    const char *same[] = {a, nodes[1].addr, a};
    cr_assert_eq(new_client_on(same, 3, why, sizeof why), DLOCK_ERR_ARG);
    cr_assert(strstr(why, "addrs[0] and addrs[2] are the same node") != NULL, "%s", why);
    const char *parsed[] = {a, a0};
    cr_assert_eq(new_client_on(parsed, 2, why, sizeof why), DLOCK_ERR_ARG, "%s", why);
    const char *upper[] = {"LocalHost:6390", "localhost:6390"};
    cr_assert_eq(new_client_on(upper, 2, why, sizeof why), DLOCK_ERR_ARG);
    const char *sock[] = {"unix:/tmp/dlock-dup.sock", "unix:/tmp/dlock-dup.sock"};
    cr_assert_eq(new_client_on(sock, 2, why, sizeof why), DLOCK_ERR_ARG);
    /* Different ports, or a socket path next to a host, are different nodes. */
    const char *distinct[] = {nodes[0].addr, nodes[1].addr, nodes[2].addr};
    cr_assert_eq(new_client_on(distinct, 3, why, sizeof why), DLOCK_OK, "%s", why);
    const char *mixed[] = {"unix:/tmp/localhost", "localhost:6390"};
    cr_assert_eq(new_client_on(mixed, 2, why, sizeof why), DLOCK_OK, "%s", why);
}

/* No resource name makes a lock key that is another resource's fence
 * counter: were the counter of "coll" the key "coll:fence", the resource
 * "coll:fence" would be an integer without TTL that SET NX refuses
 * forever. */
Test(lock_safety, lock_and_fence_keys_never_collide, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    dlock_lock *l1 = NULL, *l2 = NULL, *l3 = NULL;
    char key[TC_KEY_LEN], out[64];
    cr_assert_eq(dlock_try_acquire(c, "coll", 5000, &l1), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(c, "coll:fence", 5000, &l2), DLOCK_OK, "%s", TC_ERR(c));
    /* The namespace words themselves as resources, too. */
    cr_assert_eq(dlock_try_acquire(c, "fence:coll", 5000, &l3), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_lock_fence(l2), 1);
    cr_assert_eq(dlock_lock_fence(l3), 1);
    /* The layout dlock.h documents: "lock:<res>" holds the token, and
     * "fence:<res>" the counter. */
    tc_get(&nodes[0], tc_lock_key(key, "coll"), out, sizeof out);
    cr_assert_str_eq(out, dlock_lock_token(l1));
    tc_get(&nodes[0], tc_fence_key(key, "coll"), out, sizeof out);
    cr_assert_eq(strtoull(out, NULL, 10), dlock_lock_fence(l1));
    tc_get(&nodes[0], tc_fence_key(key, "coll:fence"), out, sizeof out);
    cr_assert_str_eq(out, "1");
    cr_assert_eq(dlock_release(c, l1), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l2), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l3), DLOCK_OK);
    dlock_lock_free(l1);
    dlock_lock_free(l2);
    dlock_lock_free(l3);
    dlock_client_free(c);
}

static void acl(const redis_proc *r, const char *rules)
{
    char out[128];
    const char *argv[] = {"ACL", "SETUSER", "fsync", "reset", "on", ">fsync-pw", "~*", "&*",
                          "+@all", rules};
    tc_cmd(r, out, sizeof out, rules != NULL ? 10 : 9, argv);
    cr_assert_str_eq(out, "OK");
}

static void acl_del(const redis_proc *r)
{
    char out[64];
    const char *argv[] = {"ACL", "DELUSER", "fsync"};
    tc_cmd(r, out, sizeof out, 3, argv);
}

/* A quorum granted the lock but the fence sync failed on the lagging nodes:
 * the caller is told FENCE_SYNC, not NO_QUORUM (or PROTOCOL), since the
 * quorum did answer. Nodes 1 and 2 may not GET (ACL, applied inside scripts too), so
 * the acquire script (SET NX, INCR) runs there and the sync script (GET,
 * SET) is refused; node 0's counter is ahead, so nodes 1 and 2 lag. */
Test(lock_safety, failed_fence_sync_has_its_own_code, .timeout = 10)
{
    dlock_options o;
    tc_addrs addrs;
    dlock_client *c = NULL;
    dlock_lock *l = (dlock_lock *)0x1;
    char out[64], key[TC_KEY_LEN];
    acl(&nodes[0], NULL);
    acl(&nodes[1], "-get");
    acl(&nodes[2], "-get");
    const char *set[] = {"SET", tc_fence_key(key, "fsr"), "10"};
    tc_cmd(&nodes[0], out, sizeof out, 3, set);
    cr_assert_str_eq(out, "OK");
    tc_options(&o, &addrs, nodes, NODES);
    o.username = "fsync";
    o.password = "fsync-pw";
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    dlock_err e = dlock_try_acquire(c, "fsr", 1000, &l);
    char why[DLOCK_ERRSTR_LEN];
    dlock_client_errstr(c, why, sizeof why);
    for (size_t i = 0; i < NODES; i++)
        acl_del(&nodes[i]);
    cr_assert_eq(e, DLOCK_ERR_FENCE_SYNC, "got %s: %s", dlock_strerror(e), why);
    cr_assert_null(l);
    cr_assert(strstr(why, "fence counter reached 11 on only 1 of them") != NULL, "%s", why);
    cr_assert(dlock_err_is_unavailable(DLOCK_ERR_FENCE_SYNC));
    dlock_client_free(c);
}

typedef struct errstr_writer {
    dlock_client *c;
    const char *names[2];
    _Atomic int stop;
    int rounds;
} errstr_writer;

static void *write_errstrs(void *p)
{
    errstr_writer *w = p;
    for (w->rounds = 0; !atomic_load(&w->stop); w->rounds++) {
        dlock_lock *l = NULL;
        (void)dlock_try_acquire(w->c, w->names[w->rounds % 2], 5000, &l);
    }
    return NULL;
}

/* dlock_client_errstr copies, under the client's mutex: the client's own
 * buffer, handed out, could be rewritten by another thread's failing call
 * while the caller reads it. Every copy is one whole message. */
Test(lock_safety, errstr_copy_is_one_whole_message, .timeout = 15)
{
    char longname[120], want[2][DLOCK_ERRSTR_LEN], buf[DLOCK_ERRSTR_LEN];
    dlock_client *holder = tc_client(nodes, 1, 0), *shared = tc_client(nodes, 1, 0);
    dlock_lock *h[2] = {NULL, NULL};
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    errstr_writer w = {.c = shared, .names = {longname, "y"}};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(dlock_try_acquire(holder, w.names[i], 10000, &h[i]), DLOCK_OK);
        cr_assert_eq(dlock_try_acquire(shared, w.names[i], 5000, &(dlock_lock *){NULL}),
                     DLOCK_ERR_TAKEN);
        dlock_client_errstr(shared, want[i], sizeof want[i]);
    }
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, write_errstrs, &w), 0);
    long copies = 0, torn = 0;
    int64_t until = dlock_now_ms() + 1500;
    while (dlock_now_ms() < until) {
        dlock_client_errstr(shared, buf, sizeof buf);
        copies++;
        if (strcmp(buf, want[0]) != 0 && strcmp(buf, want[1]) != 0 && torn++ == 0)
            fprintf(stderr, "torn copy: \"%s\"\n", buf);
    }
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    cr_assert_gt(w.rounds, 100, "only %d failing calls to race with", w.rounds);
    cr_assert_eq(torn, 0, "%ld of %ld copies were not one whole message", torn, copies);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(dlock_release(holder, h[i]), DLOCK_OK);
        dlock_lock_free(h[i]);
    }
    dlock_client_free(holder);
    dlock_client_free(shared);
}
