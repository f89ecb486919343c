/* release.c - dlock_release: token-checked delete on every node in parallel
 * (a multi lock's round is in multi.c). */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>

void dlock__release_round(dlock_client *c, const char *resource, const char *token,
                          uint32_t mask, uint32_t reach,
                          uint32_t *ones_mask, uint32_t *zeros_mask, dlock__result *res)
{
    char key[DLOCK__KEY_BUF];
    const char *keys[1] = {key};
    const char *args[1] = {token};
    const char *const *kv = keys, *const *av = args;
    dlock__script_id script = DLOCK__SCRIPT_RELEASE;
    dlock__pass_buf pb;
    int nkeys = 1, nargs = 1;
    uint32_t unknown = 0;

    *ones_mask = 0;
    *zeros_mask = 0;
    if (dlock__lock_key(c, resource, key, sizeof(key)) != 0)
        return; /* checked at acquire: cannot happen */
    /* pass.lua hands the key straight to the oldest listed waiter of
     * each node (queue.c on one node, rqueue.c over a quorum), or deletes
     * it when none is listed. Also from a polling client (wake_on_release
     * = 0): how a client waits is its own choice, but its release must not
     * strand the waiters queued behind it until its key would have
     * expired. release.lua is the fallback when pass.lua's keys do not
     * fit (they cannot: checked at acquire). */
    if (dlock__pass_prepare(c, resource, token, &pb) == 0) {
        script = DLOCK__SCRIPT_PASS;
        kv = pb.keys;
        av = pb.args;
        nkeys = 3;
        nargs = 3;
    }
    /* On every node, not only those that granted the lock: a node that timed
     * out during acquire may still have set the key (distlock page,
     * "releasing the lock"). The script deletes only our token's key. A
     * node whose breaker is open is asked only if the acquire may have
     * landed there (may_hold); then the release queues behind it. */
    dlock__script_round(c, mask, reach, script, kv, nkeys, av, nargs, res,
                        dlock__quorum_of_ones, &c->quorum);
    /* A node that has not answered may yet answer NOSCRIPT (its script
     * cache emptied, or this script never run there before), and then the
     * release never runs there and nobody resends it: send the body behind
     * it. Running twice is harmless: the token check makes the second run
     * a no-op (tokens are never reused). One node only: with Redlock a
     * lagging minority would get a second command queued per release. */
    for (size_t i = 0; c->n == 1 && i < c->n; i++)
        if ((mask & (1u << i)) &&
            (res[i].status == DLOCK__R_TIMEOUT || res[i].status == DLOCK__R_PENDING))
            unknown |= 1u << i;
    if (unknown != 0)
        dlock__script_send_only(c, unknown, script, kv, nkeys, av, nargs);
    dlock__count_int(res, c->n, 1, ones_mask);
    dlock__count_int(res, c->n, 0, zeros_mask);
    *ones_mask &= mask;
    *zeros_mask &= mask;
}

dlock_err dlock_release(dlock_client *c, dlock_lock *lock)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__result res[DLOCK_MAX_NODES];
    uint32_t ones_mask = 0, zeros_mask = 0, all;
    size_t ones;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    memset(res, 0, sizeof(res));
    pthread_mutex_lock(&c->mu);
    if (lock == NULL) {
        dlock__errf(c->errstr, "release: lock is NULL");
        goto out;
    }
    if (dlock__check_owner(c, lock, "release", c->errstr) != 0)
        goto out;
    if (lock->release_sent) {
        /* Nothing to send: our deletes went out already, and a second
         * round would only find them done and answer a false LOST. */
        dlock__errf(c->errstr, "release \"%s\": already released", lock->resource);
        goto out;
    }
    /* Renewal stops first, under the same mutex the watchdog renews under:
     * no extension can be in flight or start after this point, so nothing
     * prolongs the lock behind our back once it is released. */
    dlock__renew_unregister_locked(c, lock);
    /* From here on the lock is not held, whatever this round answers: a
     * delete that a node has not answered may still run at any moment and
     * free the key for the next owner, so a holder that kept going after a
     * failed release could overlap them. LOST below overrides RELEASED. */
    lock->release_sent = 1;
    if (atomic_load(&lock->state) == DLOCK__HELD)
        atomic_store(&lock->state, DLOCK__RELEASED);
    all = dlock__all_nodes(c);
    if (lock->multi != NULL)
        dlock__multi_release_round(c, lock, all, lock->may_hold, &ones_mask, &zeros_mask, res);
    else
        dlock__release_round(c, lock->resource, lock->token, all, lock->may_hold, &ones_mask,
                             &zeros_mask, res);
    ones = dlock__popcount(ones_mask);
    if (ones >= c->quorum) {
        c->stats.releases++;
        rc = DLOCK_OK;
    } else if (c->n - dlock__popcount(zeros_mask) < c->quorum) {
        /* So many nodes answered "not our token" that even if every silent
         * node still held it, no quorum could: the lock had expired or was
         * taken over at some point, so the critical section may have
         * overlapped another holder's. With fewer refusals the silent nodes
         * may complete a quorum, and LOST would be a false alarm. */
        atomic_store(&lock->state, DLOCK__LOST);
        c->stats.lost++;
        dlock__errf(c->errstr, "release \"%s\": our token was on only %zu/%zu nodes (quorum %zu)",
                    lock->resource, ones, c->n, c->quorum);
        rc = DLOCK_ERR_LOST;
    } else {
        rc = dlock__unavailable(c, res, all, ones_mask | zeros_mask, c->errstr);
        c->stats.errors++;
    }
out:
    dlock__results_clear(res, DLOCK_MAX_NODES);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
