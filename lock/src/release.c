/* release.c - dlock_release and every release round, on every node in
 * parallel:
 * - one resource's (pass.lua: the key, if it holds our token, is handed to
 *   the oldest queued waiter or deleted);
 * - a multi lock's (multi_release.lua, the same for every key of the set
 *   in one step). */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t dlock__release_unanswered(const dlock_client *c, uint32_t mask,
                                   const dlock__result *res)
{
    uint32_t unknown = 0;

    for (size_t i = 0; c->n == 1 && i < c->n; i++)
        if ((mask & (1u << i)) &&
            (res[i].status == DLOCK__R_TIMEOUT || res[i].status == DLOCK__R_PENDING))
            unknown |= 1u << i;
    return unknown;
}

void dlock__release_round(dlock_client *c, const char *resource, const char *token,
                          uint32_t mask, uint32_t reach,
                          uint32_t *ones_mask, uint32_t *zeros_mask, dlock__result *res)
{
    dlock__pass_buf pb;
    uint32_t unknown = 0;

    *ones_mask = 0;
    *zeros_mask = 0;
    /* pass.lua hands the key straight to the oldest listed waiter of
     * each node (queue.c on one node, rqueue.c over a quorum), or deletes
     * it when none is listed. Also from a polling client (wake_on_release
     * = 0): how a client waits is its own choice, but its release must not
     * strand the waiters queued behind it until its key would have
     * expired. */
    if (dlock__pass_prepare(c, resource, token, &pb) != 0)
        return; /* the keys' lengths were checked at acquire: cannot happen */
    /* On every node, not only those that granted the lock: a node that timed
     * out during acquire may still have set the key (distlock page,
     * "releasing the lock"). The script deletes only our token's key. A
     * node whose breaker is open is asked only if the acquire may have
     * landed there (may_hold); then the release queues behind it. */
    dlock__script_round(c, mask, reach, DLOCK__SCRIPT_PASS, pb.keys, 3, pb.args, 4, res,
                        dlock__quorum_of_ones, &c->quorum);
    /* A node that has not answered may yet answer NOSCRIPT (its script
     * cache emptied, or this script never run there before), and then the
     * release never runs there and nobody resends it: send the body behind
     * it. Running twice is harmless: the token check makes the second run
     * a no-op (tokens are never reused). One node only: with Redlock a
     * lagging minority would get a second command queued per release. */
    unknown = dlock__release_unanswered(c, mask, res);
    if (unknown != 0)
        dlock__script_send_only(c, unknown, DLOCK__SCRIPT_PASS, pb.keys, 3, pb.args, 4);
    dlock__count_int(res, c->n, 1, ones_mask);
    dlock__count_int(res, c->n, 0, zeros_mask);
    *ones_mask &= mask;
    *zeros_mask &= mask;
}

/* multi_release.lua's answer: 1 when every key held our token (each was
 * handed on or deleted), 0 when some did not. */
static int all_ours(const dlock__result *r)
{
    return r->status == DLOCK__R_REPLY && r->reply->type == REDIS_REPLY_INTEGER &&
           r->reply->integer == 1;
}

int dlock__release_decided(const dlock__result *res, size_t nodes, void *arg)
{
    size_t ok = 0;

    for (size_t i = 0; i < nodes; i++)
        ok += (size_t)all_ours(&res[i]);
    return ok >= *(const size_t *)arg;
}

void dlock__multi_release_round(dlock_client *c, const dlock_lock *lock, uint32_t mask,
                                uint32_t reach, uint32_t *ones_mask, uint32_t *zeros_mask,
                                dlock__result *res)
{
    const dlock__multi *m = lock->multi;
    dlock__multi_keys *mk =
        dlock__multi_keys_new(c, (const char *const *)m->names, m->n, lock->token);
    uint32_t unknown = 0;

    *ones_mask = 0;
    *zeros_mask = 0;
    if (mk == NULL) {
        /* No memory for the keys: release them one by one (pass.lua, no
         * allocation needed); a node counts as "ours" only where every
         * key was. */
        uint32_t ones, zeros;

        *ones_mask = mask;
        for (size_t j = 0; j < m->n; j++) {
            dlock__release_round(c, m->names[j], lock->token, mask, reach, &ones, &zeros, res);
            *ones_mask &= ones;
            *zeros_mask |= zeros;
        }
        return;
    }
    /* One script per node hands every key with queued waiters to the
     * oldest of them and deletes the rest: whether this round's answer
     * comes in time or not, no waiter is left to our TTL. */
    dlock__script_round(c, mask, reach, DLOCK__SCRIPT_MULTI_RELEASE, mk->keys, (int)(3 * m->n),
                        mk->args, (int)(3 + m->n), res, dlock__release_decided, &c->quorum);
    dlock__count_int(res, c->n, 1, ones_mask);
    dlock__count_int(res, c->n, 0, zeros_mask);
    *ones_mask &= mask;
    *zeros_mask &= mask;
    /* One node: a release not answered may yet meet NOSCRIPT (as above). */
    unknown = dlock__release_unanswered(c, mask, res);
    if (unknown != 0)
        dlock__script_send_only(c, unknown, DLOCK__SCRIPT_MULTI_RELEASE, mk->keys,
                                (int)(3 * m->n), mk->args, (int)(3 + m->n));
    free(mk);
}

int dlock__release_ready(const dlock_client *c, const dlock_lock *lock, const char *op,
                         char *errbuf)
{
    if (lock == NULL) {
        dlock__errf(errbuf, "%s: lock is NULL", op);
        return -1;
    }
    if (dlock__check_owner(c, lock, op, errbuf) != 0)
        return -1;
    if (lock->release_sent) {
        /* Nothing to send: our deletes went out already, and a second
         * round would only find them done and answer a false LOST. */
        dlock__errf(errbuf, "%s \"%s\": already released", op, lock->resource);
        return -1;
    }
    return 0;
}

void dlock__release_mark(dlock_client *c, dlock_lock *lock)
{
    /* Renewal stops first, under the same mutex the watchdog renews under:
     * no extension can be in flight or start after this point, so nothing
     * prolongs the lock behind our back once it is released. */
    dlock__renew_unregister_locked(c, lock);
    /* From here on the lock is not held, whatever the round answers. A
     * delete that a node has not answered may still run at any moment and
     * free the key for the next owner. So a holder that kept going after a
     * failed release could overlap them. LOST (the outcome) overrides
     * RELEASED. */
    lock->release_sent = 1;
    dlock__held_remove(c, lock);
    if (atomic_load(&lock->state) == DLOCK__HELD)
        atomic_store(&lock->state, DLOCK__RELEASED);
}

dlock_err dlock__release_outcome(dlock_client *c, dlock_lock *lock, uint32_t ones_mask,
                                 uint32_t zeros_mask, const dlock__result *res, char *errbuf)
{
    size_t ones = dlock__popcount(ones_mask);

    if (ones >= c->quorum) {
        c->stats.releases++;
        return DLOCK_OK;
    }
    if (c->n - dlock__popcount(zeros_mask) < c->quorum) {
        /* So many nodes answered "not our token" that even if every silent
         * node still held it, no quorum could: the lock had expired or was
         * taken over at some point, so the critical section may have
         * overlapped another holder's. With fewer refusals the silent nodes
         * may complete a quorum, and LOST would be a false alarm. */
        char gone[96], silent[96];

        atomic_store(&lock->state, DLOCK__LOST);
        c->stats.lost++;
        dlock__nodes_text(c, zeros_mask, gone, sizeof(gone));
        dlock__nodes_text(c, dlock__all_nodes(c) & ~(ones_mask | zeros_mask), silent,
                          sizeof(silent));
        dlock__errf(errbuf, "release \"%s\": our token was on only %zu/%zu nodes (quorum %zu); "
                    "not ours on %s%s%s", lock->resource, ones, c->n, c->quorum, gone,
                    silent[0] != '\0' ? "; no answer from " : "", silent);
        return DLOCK_ERR_LOST;
    }
    c->stats.errors++;
    return dlock__unavailable(c, res, dlock__all_nodes(c), ones_mask | zeros_mask, errbuf);
}

dlock_err dlock__release_locked(dlock_client *c, dlock_lock *lock, char *errbuf)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__result res[DLOCK_MAX_NODES];
    uint32_t ones_mask = 0, zeros_mask = 0, all;

    memset(res, 0, sizeof(res));
    if (dlock__release_ready(c, lock, "release", errbuf) != 0)
        return rc;
    dlock__release_mark(c, lock);
    all = dlock__all_nodes(c);
    if (lock->multi != NULL)
        dlock__multi_release_round(c, lock, all, lock->may_hold, &ones_mask, &zeros_mask, res);
    else
        dlock__release_round(c, lock->resource, lock->token, all, lock->may_hold, &ones_mask,
                             &zeros_mask, res);
    rc = dlock__release_outcome(c, lock, ones_mask, zeros_mask, res, errbuf);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

dlock_err dlock_release(dlock_client *c, dlock_lock *lock)
{
    dlock_err rc;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "release") != 0)
        return DLOCK_ERR_ARG;
    rc = dlock__release_locked(c, lock, c->errstr);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
