/* extend.c - dlock_extend and the extension step shared with the watchdog. */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Extends lock to ttl_ms on every node that still holds its token; client
 * mutex held. Updates the lock's validity on success, shortens it to what
 * the extended nodes promise when the outcome is unknown, marks it lost
 * when a quorum no longer holds it. Counts extends / lost / errors. */
dlock_err dlock__extend_locked(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms, char *errbuf)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__result res[DLOCK_MAX_NODES];
    char key[DLOCK__KEY_BUF], ttl_s[16];
    const char *one_key[1] = {key};
    const char *const *keys = one_key;
    const char *args[2];
    dlock__multi_keys *mk = NULL;
    dlock__script_id extend_id = DLOCK__SCRIPT_EXTEND;
    int nkeys = 1;
    uint32_t ones_mask = 0, zeros_mask = 0;
    int64_t t0, elapsed, drift, validity;
    size_t ones;

    memset(res, 0, sizeof(res));
    if (atomic_load(&lock->state) != DLOCK__HELD) {
        /* Never revive a lock we already reported released or lost: its
         * owner has been told to stop, and may have. */
        dlock__errf(errbuf, "extend \"%s\": lock was already %s", lock->resource,
                    atomic_load(&lock->state) == DLOCK__RELEASED ? "released" : "lost");
        rc = DLOCK_ERR_LOST;
        c->stats.lost++;
        goto out;
    }
    if (lock->multi != NULL) {
        /* Every key of the set, in one script: the set is extended on a
         * node only where all of it still holds our token. */
        mk = dlock__multi_keys_new(c, (const char *const *)lock->multi->names, lock->multi->n,
                                   lock->token);
        if (mk == NULL) {
            dlock__errf(errbuf, "extend: out of memory for the keys");
            rc = DLOCK_ERR_NOMEM;
            goto out;
        }
        keys = mk->keys;
        nkeys = (int)mk->n;
        extend_id = DLOCK__SCRIPT_MULTI_EXTEND;
    } else if (dlock__lock_key(c, lock->resource, key, sizeof(key)) != 0) {
        dlock__errf(errbuf, "extend: key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        goto out;
    }
    snprintf(ttl_s, sizeof(ttl_s), "%u", ttl_ms);
    args[0] = lock->token;
    args[1] = ttl_s;
    /* Same validity rule as acquire: the new TTL starts no earlier than t0
     * on any node, minus the time the round took and the clock drift. */
    t0 = dlock_now_ms();
    dlock__script_round(c, dlock__all_nodes(c), 0, extend_id, keys, nkeys, args, 2, res,
                        dlock__quorum_of_ones, &c->quorum);
    elapsed = dlock_now_ms() - t0;
    drift = dlock__drift_ms(c, ttl_ms);
    validity = (int64_t)ttl_ms - elapsed - drift;
    ones = dlock__count_int(res, c->n, 1, &ones_mask);
    dlock__count_int(res, c->n, 0, &zeros_mask);
    if (ones >= c->quorum && validity > 0) {
        atomic_store(&lock->valid_until_ms, t0 + (int64_t)ttl_ms - drift);
        lock->renew_base_ms = t0;
        lock->renew_retry_ms = 0; /* the watchdog counts from this round now */
        lock->cur_ttl_ms = ttl_ms;
        c->stats.extends++;
        rc = DLOCK_OK;
        goto out;
    }
    if (ones < c->quorum && c->n - dlock__popcount(zeros_mask) >= c->quorum) {
        /* Not enough "yes", but the silent nodes may still hold our token
         * and complete a quorum: unknown, not lost. The nodes we did extend
         * are NOT released, since dropping them could break the quorum the
         * remaining validity relies on. That validity is the earlier of two
         * ends: a node the PEXPIRE did not reach keeps its old expiry, and
         * one it reached - answered, or silent and maybe running it late -
         * expires at t0 + ttl_ms at the earliest. With ttl_ms shorter than
         * the time left, keeping the old end would let those nodes expire
         * under a lock that still claims to be held. */
        int64_t shortened = t0 + (int64_t)ttl_ms - drift;

        if (shortened < atomic_load(&lock->valid_until_ms))
            atomic_store(&lock->valid_until_ms, shortened);
        rc = dlock__unavailable(c, res, dlock__all_nodes(c), ones_mask | zeros_mask, errbuf);
        c->stats.errors++;
        goto out;
    }
    if (ones >= c->quorum)
        dlock__errf(errbuf,
                    "extend \"%s\": validity used up: elapsed %lld ms + drift %lld ms >= ttl %u ms",
                    lock->resource, (long long)elapsed, (long long)drift, ttl_ms);
    else {
        /* Which nodes answered "not our token" (another owner's key, or
         * none): what an operator looks at next (dlockctl show). */
        char gone[160] = "";
        size_t used = 0;

        for (size_t i = 0; i < c->n && used < sizeof(gone); i++) {
            int m;

            if (!(zeros_mask & (1u << i)))
                continue;
            m = snprintf(gone + used, sizeof(gone) - used, "%s%s", used ? ", " : "",
                         c->nodes[i].addr.text);
            used += m > 0 ? (size_t)m : 0;
        }
        dlock__errf(errbuf, "extend \"%s\": our token was on only %zu/%zu nodes (quorum %zu); "
                    "not ours on %s", lock->resource, ones, c->n, c->quorum,
                    gone[0] != '\0' ? gone : "(no node answered)");
    }
    atomic_store(&lock->state, DLOCK__LOST);
    c->stats.lost++;
    rc = DLOCK_ERR_LOST;
    /* The lock is gone, but the nodes that did extend now keep our key for
     * a whole new TTL: release them so the minority does not block the next
     * owner for that long. */
    if (lock->multi != NULL) {
        /* A multi lock is lost when one key of the set is gone, but the
         * nodes that answered 0 still hold the rest of the set under our
         * token until it expires: free those keys too. */
        ones_mask |= zeros_mask;
    }
    /* As a release: a key with queued waiters goes to the oldest of them
     * (pass.lua, multi_release.lua), not to its TTL. */
    if (ones_mask != 0 && mk != NULL) {
        dlock__script_send_only(c, ones_mask, DLOCK__SCRIPT_MULTI_RELEASE, mk->keys,
                                (int)(3 * mk->n), mk->args, (int)(3 + mk->n));
    } else if (ones_mask != 0) {
        dlock__pass_buf pb;

        if (dlock__pass_prepare(c, lock->resource, lock->token, &pb) == 0)
            dlock__script_send_only(c, ones_mask, DLOCK__SCRIPT_PASS, pb.keys, 3, pb.args, 4);
    }
out:
    free(mk);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

dlock_err dlock_extend(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms)
{
    dlock_err rc;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "extend") != 0)
        return DLOCK_ERR_ARG;
    if (lock == NULL) {
        dlock__errf(c->errstr, "extend: lock is NULL");
        rc = DLOCK_ERR_ARG;
    } else if (dlock__ttl_check(ttl_ms, "extend", c->errstr) != 0) {
        rc = DLOCK_ERR_ARG;
    } else if (dlock__check_owner(c, lock, "extend", c->errstr) != 0) {
        /* Another client's nodes and prefix are not where the lock lives;
         * and its watchdog reads renew_base_ms / cur_ttl_ms under ITS
         * mutex, not ours. */
        rc = DLOCK_ERR_ARG;
    } else {
        rc = dlock__extend_locked(c, lock, ttl_ms, c->errstr);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
