/* strategy_redlock.c - claim under libdlock's lock "lock:coupon:<id>" (single
 * instance with one Redis address, Redlock with several), with the lock's
 * fencing token checked by the store. Same-coupon claims of this server
 * queue locally first (combiner.h) and, with --lock-batch > 1, may share one
 * acquisition. */
#include "strategy.h"

#include <inttypes.h>
#include <stdio.h>

#include "combiner.h"
#include "metrics.h"

/* One claim under a held lock. The fence goes into the claim transaction:
 * if our lease ran out while we were paused (GC, swap, SIGSTOP) and a newer
 * holder already wrote, the store sees a higher last_fence and refuses us
 * (DB_STALE_FENCE) instead of letting two holders interleave writes. */
static claim_result claim_locked(worker *w, dlock_lock *lock, int64_t coupon_id, const char *user_id,
                                 claim_out *out)
{
    out->fence = dlock_lock_fence(lock);
    db_status st = db_claim_coupon(w->db, coupon_id, user_id, out->fence, &out->rec);
    if (st != DB_OK)
        snprintf(out->detail, sizeof out->detail, "%s", db_errmsg(w->db));
    if (st == DB_STALE_FENCE)
        metrics_lock_error(LOCK_ERROR_STALE_FENCE);
    return claim_from_db(st);
}

/* With --lock-batch > 1: runs queued claims of this coupon under our
 * acquisition while the lock is still comfortably ours (at least half the
 * TTL left, so a claim never starts near expiry). The batch size bounds how
 * long one server keeps the lock from the others. These claims share our
 * fence, so the store's fence check (>= last_fence) still refuses them once
 * a newer holder wrote; what is given up is one distinct fence per record. */
static void serve_queued(worker *w, const app_config *cfg, dlock_lock *lock, int64_t coupon_id)
{
    for (int served = 1; served < cfg->lock_batch; served++) {
        if (dlock_lock_validity_ms(lock) < (int64_t)cfg->lock_ttl_ms / 2)
            return;
        combine_req *r = combiner_take(coupon_id);
        if (r == NULL)
            return;
        metrics_lock_wait_us(metrics_now_us() - r->t0_us);
        metrics_lock_combined();
        claim_result res = claim_locked(w, lock, r->coupon_id, r->user_id, r->out);
        combiner_complete(r, res);
        /* Someone newer holds the lock: stop using ours. */
        if (res == CLAIM_STALE_FENCE)
            return;
    }
}

static claim_result redlock_claim(worker *w, const app_config *cfg, int64_t coupon_id, const char *user_id,
                                  claim_out *out)
{
    claim_result result = CLAIM_ERROR;
    dlock_lock *lock = NULL;
    dlock_stats before, after;
    combine_req me;
    int combining = 0, leading = 0;
    char resource[64];

    out->fence = 0;
    /* One deadline covers the local queue and the Redis attempts together,
     * so --lock-wait bounds the whole wait the client sees. */
    int64_t deadline = dlock_now_ms() + cfg->lock_wait_ms;
    int64_t t0 = metrics_now_us();
    if (combine_req_init(&me, coupon_id, user_id, out, t0) == 0) {
        combining = 1;
        join_result j = combiner_join(&me, deadline);
        if (j == JOIN_DONE) {
            result = me.result;
            goto out;
        }
        if (j == JOIN_TIMEOUT) {
            metrics_lock_wait_us(metrics_now_us() - t0);
            metrics_lock_error(LOCK_ERROR_TIMEOUT);
            snprintf(out->detail, sizeof out->detail, "queued behind other claims of this server");
            result = CLAIM_LOCK_TIMEOUT;
            goto out;
        }
        leading = 1;
    }

    /* One lock per coupon: claims on different coupons never wait for each other. */
    snprintf(resource, sizeof resource, "lock:coupon:%" PRId64, coupon_id);
    dlock_client_stats(w->lock, &before);
    dlock_err e = dlock_acquire(w->lock, resource, cfg->lock_ttl_ms, deadline, &lock);
    metrics_lock_wait_us(metrics_now_us() - t0);
    /* This slot's client serves this thread alone right now, so the stats
     * delta is exactly this acquisition's retries. */
    dlock_client_stats(w->lock, &after);
    metrics_lock_retries(after.retries - before.retries);
    if (e != DLOCK_OK) {
        snprintf(out->detail, sizeof out->detail, "%s: %s", dlock_strerror(e), dlock_client_errstr(w->lock));
        if (e == DLOCK_ERR_TAKEN || e == DLOCK_ERR_EXPIRED) {
            metrics_lock_error(e == DLOCK_ERR_TAKEN ? LOCK_ERROR_TIMEOUT : LOCK_ERROR_EXPIRED);
            result = CLAIM_LOCK_TIMEOUT;
        } else if (dlock_err_is_unavailable(e)) {
            metrics_lock_error(LOCK_ERROR_UNAVAILABLE);
            result = CLAIM_LOCK_UNAVAILABLE;
        } else {
            metrics_lock_error(LOCK_ERROR_OTHER);
            result = CLAIM_ERROR;
        }
        goto out;
    }
    metrics_lock_acquired();
    result = claim_locked(w, lock, coupon_id, user_id, out);
    if (leading && result != CLAIM_STALE_FENCE)
        serve_queued(w, cfg, lock, coupon_id);

    /* Every outcome stands whatever the release says: each write is already
     * committed or refused. LOST means the lease ended before we released;
     * the fence already protected the writes (a newer holder's higher fence
     * makes the store refuse ours, and ours committed before theirs
     * otherwise), so it is counted, not turned into an error. Any other
     * failure leaves the key to expire after its TTL. */
    dlock_err re = dlock_release(w->lock, lock);
    if (re == DLOCK_ERR_LOST)
        metrics_lock_lost();
    else if (re != DLOCK_OK)
        metrics_lock_error(LOCK_ERROR_RELEASE);
out:
    dlock_lock_free(lock);
    /* Only after the release: the next leader's first attempt then finds
     * the key already gone instead of sleeping a retry pause. */
    if (leading)
        combiner_leave(coupon_id);
    if (combining)
        combine_req_destroy(&me);
    return result;
}

static lock_health redlock_health(worker *w, size_t *nodes_up, size_t *nodes)
{
    *nodes = dlock_client_nodes(w->lock);
    *nodes_up = 0;
    return dlock_ping(w->lock, nodes_up) == DLOCK_OK ? LOCK_HEALTH_OK : LOCK_HEALTH_DOWN;
}

const strategy strategy_redlock = {
    .name = "redlock",
    .uses_lock = 1,
    .claim = redlock_claim,
    .health = redlock_health,
};
