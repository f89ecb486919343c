/* bundle_lock.c - the bundle's lock ways (bundle.h): one libdlock lock per
 * coupon in the request's order or in id order, or every coupon at once
 * (dlock_acquire_multi). The keys are the single claim's, "coupon:<id>",
 * so bundles and single claims of a coupon exclude each other. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "claim/bundle.h"
#include "claim/fault.h"
#include "common.h"
#include "core/metrics.h"


/* order[k]: the item locked k-th. */
static void lock_order(const bundle_job *job, bundle_lock_kind kind, size_t *order)
{
    for (size_t i = 0; i < job->n; i++)
        order[i] = i;
    if (kind != BUNDLE_LOCK_SORTED)
        return;
    for (size_t i = 1; i < job->n; i++) {
        size_t v = order[i], j = i;
        while (j > 0 && job->ids[order[j - 1]] > job->ids[v]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

static void release_all(worker *w, dlock_lock **locks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL)
            continue;
        /* LOST: the lease ended before the release; under --fence full the
         * store refused our write if a newer holder read meanwhile. */
        dlock_err re = dlock_release(w->lock, locks[i]);
        if (re == DLOCK_ERR_LOST)
            metrics_lock_lost();
        else if (re != DLOCK_OK)
            metrics_lock_release_error();
        dlock_lock_free(locks[i]);
        locks[i] = NULL;
    }
}

static void lock_failure(worker *w, bundle_job *job, dlock_err e, int64_t coupon_id, claim_result *lock_failed)
{
    lock_error_kind kind;
    char why[DLOCK_ERRSTR_LEN];

    char what[40] = "every coupon at once";
    if (coupon_id > 0)
        snprintf(what, sizeof what, "coupon %" PRId64, coupon_id);
    snprintf(job->base.out.detail, sizeof job->base.out.detail, "%s: %s: %s", what, dlock_strerror(e),
             dlock_client_errstr(w->lock, why, sizeof why));
    *lock_failed = claim_from_lock(e, &kind); /* 1005 or 1006: claim/outcome.c */
    metrics_lock_error(kind);
}

/* multi: every coupon in one acquisition, one round per node, all or
 * none; nothing is held while the rest is waited for, so no order of the
 * ids can deadlock, and each coupon still gets its own fence. */
static db_status under_one_lock(worker *w, const app_config *cfg, bundle_job *job, db_bundle_item *items,
                                int64_t deadline, int64_t t0, claim_result *lock_failed, bundle_section_fn section)
{
    char names[BUNDLE_MAX][32];
    const char *resources[BUNDLE_MAX];
    dlock_lock *lock = NULL;
    db_status st = DB_ERROR;

    for (size_t i = 0; i < job->n; i++) {
        snprintf(names[i], sizeof names[i], "coupon:%" PRId64, job->ids[i]);
        resources[i] = names[i];
    }
    dlock_err e = dlock_acquire_multi(w->lock, resources, job->n, cfg->lock_ttl_ms, deadline, &lock);
    metrics_lock_wait_us(cm_now_us() - t0);
    if (e != DLOCK_OK) {
        lock_failure(w, job, e, 0, lock_failed);
        return DB_ERROR;
    }
    metrics_lock_acquired();
    /* --fault-crash-after-lock: dying here leaves every key to its TTL. */
    fault_lock_acquired(cfg);
    for (size_t i = 0; i < job->n; i++)
        items[i].fence = dlock_lock_fence_of(lock, i); /* resource i in the caller's order */
    st = section(w, cfg, job, items);
    release_all(w, &lock, 1);
    return st;
}

/* Lets go of the locks this worker's client keeps (--lock-cache-ms) on the
 * bundle's coupons, which its own acquisitions would otherwise find taken
 * until the client heard their notice. */
static void drop_kept(worker *w, const bundle_job *job)
{
    for (size_t i = 0; i < job->n; i++) {
        char resource[64];
        snprintf(resource, sizeof resource, "coupon:%" PRId64, job->ids[i]);
        dlock_lock *kept = dlock_reuse(w->lock, resource, 0);
        if (kept != NULL)
            release_all(w, &kept, 1);
    }
}

db_status bundle_under_locks(worker *w, const app_config *cfg, bundle_lock_kind kind, bundle_job *job,
                             db_bundle_item *items, int64_t deadline_us, claim_result *lock_failed,
                             bundle_section_fn section)
{
    dlock_lock *locks[BUNDLE_MAX] = {0};
    size_t order[BUNDLE_MAX];
    db_status st = DB_ERROR;
    int64_t t0 = cm_now_us();
    /* libdlock counts on its own clock: the deadline goes over as "this long from now". */
    int64_t deadline = dlock_now_ms() + (deadline_us - t0) / 1000;

    *lock_failed = CLAIM_OK;
    if (cfg->lock_cache_ms > 0)
        drop_kept(w, job);
    if (kind == BUNDLE_LOCK_MULTI)
        return under_one_lock(w, cfg, job, items, deadline, t0, lock_failed, section);
    lock_order(job, kind, order);
    for (size_t k = 0; k < job->n; k++) {
        size_t i = order[k];
        char resource[64];
        snprintf(resource, sizeof resource, "coupon:%" PRId64, job->ids[i]);
        /* Each lock waits with the whole bundle's deadline: under
         * request-order two opposite bundles each hold their first lock
         * and wait here until it passes (the deadlock, bounded). */
        dlock_err e = dlock_acquire(w->lock, resource, cfg->lock_ttl_ms, deadline, &locks[i]);
        if (e != DLOCK_OK) {
            metrics_lock_wait_us(cm_now_us() - t0);
            lock_failure(w, job, e, job->ids[i], lock_failed);
            goto out;
        }
        metrics_lock_acquired();
        /* --fault-crash-after-lock: dying here leaves the locks taken so
         * far to their TTL, and nothing of the bundle written. */
        fault_lock_acquired(cfg);
        items[i].fence = dlock_lock_fence(locks[i]);
        /* --fault-bundle-gap-ms: a slow round between two locks, so that a
         * test can hold two opposite bundles in the deadlock for certain. */
        if (cfg->fault_bundle_gap_ms > 0 && k + 1 < job->n)
            (void)cm_sleep_ms(cfg->fault_bundle_gap_ms); /* only EINTR ends it early, and it resumes */
    }
    metrics_lock_wait_us(cm_now_us() - t0);
    st = section(w, cfg, job, items);
out:
    release_all(w, locks, job->n);
    return st;
}
