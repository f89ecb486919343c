/* extend.c - dlock_extend and the extension step shared with the watchdog. */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dlock_err dlock__extend_prepare(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms,
                                dlock__extension *x, char *errbuf)
{
    memset(x, 0, sizeof(*x));
    x->ttl_ms = ttl_ms;
    if (atomic_load(&lock->state) != DLOCK__HELD) {
        dlock__errf(errbuf, "extend \"%s\": lock was already %s", lock->resource,
                    atomic_load(&lock->state) == DLOCK__RELEASED ? "released" : "lost");
        c->stats.lost++;
        return DLOCK_ERR_LOST;
    }
    x->one_key[0] = x->key;
    x->keys = x->one_key;
    x->nkeys = 1;
    x->id = DLOCK__SCRIPT_EXTEND;
    if (lock->multi != NULL) {
        x->mk = dlock__multi_keys_new(c, (const char *const *)lock->multi->names, lock->multi->n,
                                      lock->token);
        if (x->mk == NULL) {
            dlock__errf(errbuf, "extend: out of memory for the keys");
            return DLOCK_ERR_NOMEM;
        }
        x->keys = x->mk->keys;
        x->nkeys = (int)x->mk->n;
        x->id = DLOCK__SCRIPT_MULTI_EXTEND;
    } else if (dlock__lock_key(c, lock->resource, x->key, sizeof(x->key)) != 0) {
        dlock__errf(errbuf, "extend: key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    snprintf(x->ttl_s, sizeof(x->ttl_s), "%u", ttl_ms);
    x->args[0] = lock->token;
    x->args[1] = x->ttl_s;
    x->t0 = dlock_now_ms();
    return DLOCK_OK;
}

dlock_err dlock__extend_decide(dlock_client *c, dlock_lock *lock, dlock__extension *x,
                               const dlock__result *res, char *errbuf)
{
    uint32_t ttl_ms = x->ttl_ms, ones_mask = 0, zeros_mask = 0;
    int64_t t0 = x->t0, elapsed, drift, validity;
    size_t ones;

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
        return DLOCK_OK;
    }
    if (ones < c->quorum && c->n - dlock__popcount(zeros_mask) >= c->quorum) {
        int64_t shortened = t0 + (int64_t)ttl_ms - drift;

        if (shortened < atomic_load(&lock->valid_until_ms))
            atomic_store(&lock->valid_until_ms, shortened);
        c->stats.errors++;
        return dlock__unavailable(c, res, dlock__all_nodes(c), ones_mask | zeros_mask, errbuf);
    }
    if (ones >= c->quorum)
        dlock__errf(errbuf,
                    "extend \"%s\": validity used up: elapsed %lld ms + drift %lld ms >= ttl %u ms",
                    lock->resource, (long long)elapsed, (long long)drift, ttl_ms);
    else {
        char gone[96], silent[96];

        dlock__nodes_text(c, zeros_mask, gone, sizeof(gone));
        dlock__nodes_text(c, dlock__all_nodes(c) & ~(ones_mask | zeros_mask), silent,
                          sizeof(silent));
        dlock__errf(errbuf, "extend \"%s\": our token was on only %zu/%zu nodes (quorum %zu); "
                    "not ours on %s%s%s", lock->resource, ones, c->n, c->quorum,
                    gone[0] != '\0' ? gone : "(no node answered)",
                    silent[0] != '\0' ? "; no answer from " : "", silent);
    }
    atomic_store(&lock->state, DLOCK__LOST);
    c->stats.lost++;
    /* Lost: the keys still ours are handed on at once, not left to expire
     * (a multi lock's nodes that answered 0 may still hold some of its keys). */
    x->undo_mask = lock->multi != NULL ? ones_mask | zeros_mask : ones_mask;
    return DLOCK_ERR_LOST;
}

void dlock__extend_done(dlock__extension *x)
{
    free(x->mk);
    x->mk = NULL;
}

int dlock__extend_undo(dlock_client *c, dlock_lock *lock, dlock__extension *x)
{
    if (x->undo_mask == 0)
        return 0;
    if (x->mk != NULL) {
        x->undo_id = DLOCK__SCRIPT_MULTI_RELEASE;
        x->undo_keys = x->mk->keys;
        x->undo_nkeys = (int)(3 * x->mk->n);
        x->undo_args = x->mk->args;
        x->undo_nargs = (int)(3 + x->mk->n);
        return 1;
    }
    if (dlock__pass_prepare(c, lock->resource, lock->token, &x->pass) != 0)
        return 0;
    x->undo_id = DLOCK__SCRIPT_PASS;
    x->undo_keys = x->pass.keys;
    x->undo_nkeys = 3;
    x->undo_args = x->pass.args;
    x->undo_nargs = 4;
    return 1;
}

/* Extends lock to ttl_ms on every node that still holds its token; client
 * mutex held. Updates the lock's validity on success, shortens it to what
 * the extended nodes promise when the outcome is unknown, marks it lost
 * when a quorum no longer holds it. Counts extends / lost / errors. */
dlock_err dlock__extend_locked(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms, char *errbuf)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__extension x;
    dlock_err rc;

    memset(res, 0, sizeof(res));
    rc = dlock__extend_prepare(c, lock, ttl_ms, &x, errbuf);
    if (rc == DLOCK_OK) {
        dlock__script_round(c, dlock__all_nodes(c), 0, x.id, x.keys, x.nkeys, x.args, 2, res,
                            dlock__quorum_of_ones, &c->quorum);
        rc = dlock__extend_decide(c, lock, &x, res, errbuf);
        if (rc == DLOCK_ERR_LOST && dlock__extend_undo(c, lock, &x))
            dlock__script_send_only(c, x.undo_mask, x.undo_id, x.undo_keys, x.undo_nkeys,
                                    x.undo_args, x.undo_nargs);
    }
    dlock__extend_done(&x);
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
