/* sentinel_share.c - sentinel:// nodes and the rest of the client, on
 * real redis-server and redis-sentinel processes. Asking the sentinels
 * for a master never holds the client mutex, so the watchdog keeps
 * renewing the client's other locks while a sentinel is silent. Two
 * addresses that reach one server (a sentinel name and a plain address,
 * two sentinel names) never count twice toward the quorum:
 * dlock_client_new refuses them when it can reach them, the first contact
 * when it cannot. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

/* No failover in these tests: the sentinels must not act on a pause. */
#define DOWN_AFTER_MS 60000
#define FAILOVER_TIMEOUT_MS 180000

static redis_proc master, other, third;
static sentinel_proc sent, sent2;
static int sent_paused;
static tc_lost lost;

static void start_all(void)
{
    memset(&master, 0, sizeof master);
    memset(&other, 0, sizeof other);
    memset(&third, 0, sizeof third);
    memset(&sent, 0, sizeof sent);
    memset(&sent2, 0, sizeof sent2);
    sent_paused = 0;
    tc_lost_init(&lost);
    cr_assert_eq(redis_start(&master), 0, "master did not start");
    cr_assert_eq(redis_start(&other), 0, "other did not start");
    cr_assert_eq(redis_start(&third), 0, "third did not start");
    cr_assert_eq(sentinel_start(&sent, "m", master.port, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS), 0,
                 "sentinel did not start");
}

static void stop_all(void)
{
    if (sent_paused)
        sentinel_resume(&sent);
    sentinel_stop(&sent2);
    sentinel_stop(&sent);
    redis_stop(&third);
    redis_stop(&other);
    redis_stop(&master);
    tc_lost_destroy(&lost);
}

TestSuite(lock_sentinel_share, .init = start_all, .fini = stop_all);

static dlock_err client_of(const char *const *addrs, size_t n, int connect_ms, int command_ms,
                           dlock_client **c, char *err, size_t errlen)
{
    dlock_options o;

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = n;
    o.connect_timeout_ms = connect_ms;
    o.command_timeout_ms = command_ms;
    return dlock_client_new(&o, c, err, errlen);
}

/* A sentinel that stops answering while the master's connection breaks:
 * the next round on the sentinel node must ask it for the master, and
 * that asking waits out the command timeout (600 ms). Suppose it were
 * asked inside the round, under the client mutex (here inside the
 * watchdog's own renewal round). A 400 ms lock on the other two nodes (a
 * quorum without the sentinel node) would then expire unrenewed: reported
 * lost while two of three nodes would have renewed it. */
Test(lock_sentinel_share, silent_sentinel_does_not_stall_renewals, .timeout = 60)
{
    char saddr[128], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[3] = {saddr, other.addr, third.addr};
    const char *kill_clients[4] = {"CLIENT", "KILL", "TYPE", "normal"};
    dlock_renew_options ro;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_err why = DLOCK_OK;
    char out[64];
    int64_t end;

    snprintf(saddr, sizeof saddr, "sentinel://%s/m", sent.addr);
    cr_assert_eq(client_of(addrs, 3, 200, 600, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "renewed", 400, &l), DLOCK_OK, "%s", TC_ERR(c));
    memset(&ro, 0, sizeof ro);
    ro.on_lost = tc_on_lost;
    ro.user = &lost;
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK);
    test_sleep_ms(300); /* renewing */
    cr_assert_eq(sentinel_pause(&sent), 0);
    sent_paused = 1;
    /* The master drops the client's connection: the sentinel node must
     * be asked again at its next connect. */
    tc_cmd(&master, out, sizeof out, 4, kill_clients);
    end = test_now_ms() + 3000;
    while (test_now_ms() < end && dlock_is_held(l))
        test_sleep_ms(20);
    cr_assert_eq(tc_lost_wait(&lost, 1, &why), 0,
                 "the lock was reported lost (%s) while two of three nodes could renew it: the "
                 "sentinel asking stalled the watchdog",
                 dlock_strerror(why));
    cr_assert(dlock_is_held(l), "the lock ran out while the sentinel was silent");
    cr_assert_eq(tc_exists(&other, "renewed"), 1);
    cr_assert_eq(tc_exists(&third, "renewed"), 1);
    cr_assert_gt(dlock_lock_renewals(l), 5, "only %u renewals in 3 s of a 400 ms lock",
                 dlock_lock_renewals(l));
    cr_assert_eq(sentinel_resume(&sent), 0);
    sent_paused = 0;
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The master named by the sentinel and the master's own address are one
 * server: counted twice, a lock whose other server is gone still has "a
 * majority of three" (an extend answered yes through both addresses).
 * dlock_client_new must refuse the pair. */
Test(lock_sentinel_share, sentinel_name_and_plain_address_of_one_server, .timeout = 60)
{
    char saddr[128], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[3] = {saddr, master.addr, other.addr};
    dlock_client *c = NULL;
    dlock_err rc;

    snprintf(saddr, sizeof saddr, "sentinel://%s/m", sent.addr);
    rc = client_of(addrs, 3, 200, 500, &c, err, sizeof err);
    if (rc == DLOCK_OK) {
        /* Show what that client does: with the one other server gone, the
         * master's two votes still make a quorum. */
        dlock_lock *l = NULL;
        dlock_err got = dlock_try_acquire(c, "twice", 5000, &l), ext = DLOCK_ERR_ARG;

        redis_kill(&other);
        if (got == DLOCK_OK)
            ext = dlock_extend(c, l, 5000);
        dlock_lock_free(l);
        dlock_client_free(c);
        cr_assert_fail("dlock_client_new accepted a sentinel name and a plain address of one "
                       "server; acquire gave %s, and with the other server down an extend "
                       "gave %s",
                       dlock_strerror(got), dlock_strerror(ext));
    }
    cr_assert_eq(rc, DLOCK_ERR_ARG, "%s: %s", dlock_strerror(rc), err);
    cr_assert(strstr(err, "same server") != NULL, "%s", err);
    cr_assert_null(c);
}

/* Two sentinels that monitor one master under two names: two sentinel://
 * addresses that no text comparison can tell apart. */
Test(lock_sentinel_share, two_sentinel_names_of_one_server, .timeout = 60)
{
    char a1[128], a2[128], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[3] = {a1, a2, other.addr};
    dlock_client *c = NULL;
    dlock_err rc;

    cr_assert_eq(sentinel_start(&sent2, "m2", master.port, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS), 0);
    snprintf(a1, sizeof a1, "sentinel://%s/m", sent.addr);
    snprintf(a2, sizeof a2, "sentinel://%s/m2", sent2.addr);
    rc = client_of(addrs, 3, 200, 500, &c, err, sizeof err);
    dlock_client_free(c);
    cr_assert_eq(rc, DLOCK_ERR_ARG, "two names of one server were accepted: %s %s",
                 dlock_strerror(rc), err);
    cr_assert(strstr(err, "same server") != NULL, "%s", err);
}

/* The sentinel is silent while the client is made, so its node cannot be
 * compared then; the first contact afterwards must refuse it. Then, with
 * the one other server gone, no quorum is left: extending a lock must
 * fail (a master that answered yes through both addresses would keep the
 * lock alive on one server of three). */
Test(lock_sentinel_share, same_server_refused_on_first_contact, .timeout = 60)
{
    char saddr[128], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[3] = {saddr, master.addr, other.addr};
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_err got;

    snprintf(saddr, sizeof saddr, "sentinel://%s/m", sent.addr);
    cr_assert_eq(sentinel_pause(&sent), 0);
    sent_paused = 1;
    cr_assert_eq(client_of(addrs, 3, 200, 300, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(sentinel_resume(&sent), 0);
    sent_paused = 0;
    /* First contact with the sentinel node's master (two calls: the first
     * may still find the node's breaker open after the failed asking). */
    for (int i = 0; i < 2; i++) {
        if (dlock_try_acquire(c, "first", 5000, &l) == DLOCK_OK) {
            dlock_release(c, l);
            dlock_lock_free(l);
            l = NULL;
        }
        test_sleep_ms(300);
    }
    cr_assert_eq(dlock_try_acquire(c, "first", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(redis_kill(&other), 0);
    got = dlock_extend(c, l, 5000);
    cr_assert_neq(got, DLOCK_OK,
                  "extended with only one server of the two that held the lock left: its two "
                  "addresses voted twice");
    cr_assert(strstr(TC_ERR(c), "same server") != NULL, "%s", TC_ERR(c));
    dlock_lock_free(l);
    dlock_client_free(c);
}
