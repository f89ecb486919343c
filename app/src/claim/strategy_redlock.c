/* strategy_redlock.c - the critical section under libdlock's lock
 * "lock:coupon:<id>" (single instance with one Redis address, Redlock with
 * several), with the lock's fencing token checked by the store (--fence).
 * Same-coupon claims of this server queue locally first (combiner.h) and,
 * with --lock-batch > 1, share one acquisition, one read and one write. */
#include "claim/strategy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "claim/combiner.h"
#include "claim/fault.h"
#include "claim/hold_log.h"
#include "common.h"
#include "core/metrics.h"
#include "claim/section.h"

/* The section under a held lock: our claim plus, with --lock-batch > 1,
 * claims of this coupon queued behind us in this server (combiner.h), with
 * one fenced read and one write for all of them (group commit): the lock's
 * round trips and the commit are paid once per batch. They all carry our
 * fence, so if our lease runs out mid-way (a pause, a SIGSTOP) and a newer
 * holder reads the coupon, the store refuses the whole batch (1010) and
 * nothing of it is applied. */
static claim_result run_locked(worker *w, const app_config *cfg, dlock_lock *lock, int64_t coupon_id,
                               const char *user_id, claim_out *out, int leading)
{
    db_claim_req reqs[CONFIG_MAX_BATCH];
    combine_req *queued[CONFIG_MAX_BATCH];
    uint64_t fence = dlock_lock_fence(lock);
    int64_t held_at_us = hold_log_begin(lock); /* --hold-log: before the write, see hold_log.h */
    size_t n = 1;

    memset(reqs, 0, sizeof reqs);
    reqs[0].user_id = user_id;
    /* Taken right after the acquisition, while the lease is fresh; the
     * batch size bounds how long one server keeps the lock from the others. */
    while (leading && n < (size_t)cfg->lock_batch) {
        combine_req *r = combiner_take(coupon_id);
        if (r == NULL)
            break;
        metrics_lock_wait_us(cm_now_us() - r->t0_us);
        metrics_lock_combined();
        queued[n] = r;
        reqs[n].user_id = r->user_id;
        n++;
    }

    db_status st = section_run(w, cfg, coupon_id, cfg->fence, fence, reqs, n);
    hold_log_note(lock, held_at_us, st, reqs, n);
    for (size_t i = 0; st == DB_STALE_FENCE && i < n; i++)
        metrics_lock_error(LOCK_ERROR_STALE_FENCE);
    for (size_t i = 1; i < n; i++) {
        queued[i]->out->fence = fence;
        combiner_complete(queued[i], claim_from_req(w, &reqs[i], queued[i]->out));
    }
    out->fence = fence;
    return claim_from_req(w, &reqs[0], out);
}

static claim_result redlock_claim(const strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                                  const char *user_id, claim_out *out)
{
    (void)self;
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
    int64_t t0 = cm_now_us();
    if (combine_req_init(&me, coupon_id, user_id, out, t0) == 0) {
        combining = 1;
        join_result j = combiner_join(&me, deadline);
        if (j == JOIN_DONE) {
            result = me.result;
            goto out;
        }
        if (j == JOIN_TIMEOUT) {
            metrics_lock_wait_us(cm_now_us() - t0);
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
    metrics_lock_wait_us(cm_now_us() - t0);
    /* This slot's client serves this thread alone right now, so the stats
     * delta is exactly this acquisition's retries. */
    dlock_client_stats(w->lock, &after);
    metrics_lock_retries(after.retries - before.retries);
    if (e != DLOCK_OK) {
        lock_error_kind kind;
        snprintf(out->detail, sizeof out->detail, "%s: %s", dlock_strerror(e), dlock_client_errstr(w->lock));
        result = claim_from_lock(e, &kind); /* 1005 or 1006: claim/outcome.c */
        metrics_lock_error(kind);
        goto out;
    }
    metrics_lock_acquired();
    /* --fault-crash-after-lock: dying here leaves the key to its TTL. */
    fault_lock_acquired(cfg);
    result = run_locked(w, cfg, lock, coupon_id, user_id, out, leading);

    /* Every outcome stands whatever the release says: the write is already
     * committed or refused. LOST means the lease ended before we released:
     * under --fence full the store refused our write if a newer holder had
     * read in the meantime, so it is counted, not turned into an error
     * (under --fence off or write, this is the window that oversells). Any
     * other failure leaves the key to expire after its TTL. */
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

static lock_health redlock_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes)
{
    (void)self;
    *nodes = dlock_client_nodes(w->lock);
    *nodes_up = 0;
    return dlock_ping(w->lock, nodes_up) == DLOCK_OK ? LOCK_HEALTH_OK : LOCK_HEALTH_DOWN;
}

const strategy strategy_redlock = {
    .name = "redlock",
    .summary = "the critical section under libdlock's lock, fenced (the right way)",
    .uses_lock = 1,
    /* Claims waiting for the lock wait in worker threads, so the threads
     * bound the batch (--lock-batch): 32 lets a batch of 32 fill. */
    .default_threads = 32,
    .claim = redlock_claim,
    .health = redlock_health,
};
