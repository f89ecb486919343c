/* bundle.c - the bundle claim (bundle.h): --bundle-lock resolved once at
 * start-up, the job a claim worker runs, and the section under each way. */
#include "claim/bundle.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "claim/fault.h"
#include "claim/section.h"
#include "claim/stock_view.h"
#include "common.h"
#include "core/log.h"
#include "core/metrics.h"

/* The resolved --bundle-lock: written once by bundle_setup before any
 * thread starts, only read afterwards. */
static bundle_lock_kind the_kind = BUNDLE_LOCK_ATOMIC;

static const char *const NAMES[] = {
    [BUNDLE_LOCK_REQUEST_ORDER] = "request-order",
    [BUNDLE_LOCK_SORTED] = "sorted",
    [BUNDLE_LOCK_MULTI] = "multi",
    [BUNDLE_LOCK_ATOMIC] = "atomic-sql",
};
#define N_KINDS (sizeof NAMES / sizeof NAMES[0])


int bundle_setup(const app_config *cfg, int strategy_uses_lock, char *err, size_t errlen)
{
    const char *name = cfg->bundle_lock;

    if (name == NULL) {
        /* A server whose --strategy takes no lock has no lock client to
         * take one per bundle with, and needs no Redis: its bundles are the
         * lock-free transaction too. */
        the_kind = strategy_uses_lock ? BUNDLE_LOCK_MULTI : BUNDLE_LOCK_ATOMIC;
        return 0;
    }
    for (size_t k = 0; k < N_KINDS; k++) {
        if (strcmp(name, NAMES[k]) != 0)
            continue;
        the_kind = (bundle_lock_kind)k;
        return 0;
    }
    snprintf(err, errlen, "--bundle-lock: unknown way '%s' (known: request-order, sorted, multi, atomic-sql)", name);
    return -1;
}

int bundle_uses_lock(void)
{
    return the_kind != BUNDLE_LOCK_ATOMIC;
}

const char *bundle_lock_name(void)
{
    return NAMES[the_kind];
}

/* The store's section with this server's business step and pause fault. */
static db_status run_section(worker *w, const app_config *cfg, bundle_job *job, db_bundle_item *items)
{
    return db_bundle_section(w->db, cfg->fence, job->base.user_id, items, job->n, section_business_step,
                             (void *)cfg);
}


static claim_result from_items(worker *w, bundle_job *job, db_status st, const db_bundle_item *items)
{
    claim_result r = claim_from_db(st);

    /* The stock view learns only what is committed: a refused bundle's
     * other items were rolled back (atomic-sql decremented them first), so
     * their stock_left is not the store's; a sold-out item's 0 is. */
    if (st == DB_OK) {
        for (size_t i = 0; i < job->n; i++) {
            job->record_ids[i] = items[i].record_id;
            job->fences[i] = items[i].fence;
            stock_view_learn(items[i].coupon_id, items[i].stock_left);
        }
    } else if (st == DB_SOLD_OUT || st == DB_USER_LIMIT) {
        for (size_t i = 0; i < job->n; i++) {
            job->sold_out[i] = items[i].status == DB_SOLD_OUT;
            if (job->sold_out[i])
                stock_view_learn(items[i].coupon_id, 0);
        }
        snprintf(job->base.out.detail, sizeof job->base.out.detail, "%s", db_status_str(st));
    } else {
        snprintf(job->base.out.detail, sizeof job->base.out.detail, "%s", db_errmsg(w->db));
    }
    return r;
}

static void bundle_run(claim_job *base, worker *w, const app_config *cfg)
{
    /* The queue hands back the job it was given: base is a bundle_job's first member. */
    bundle_job *job = (bundle_job *)base;
    db_bundle_item items[BUNDLE_MAX];
    claim_result lock_failed = CLAIM_OK;
    db_status st;

    memset(items, 0, sizeof items);
    for (size_t i = 0; i < job->n; i++)
        items[i].coupon_id = job->ids[i];
    if (the_kind == BUNDLE_LOCK_ATOMIC) {
        st = db_bundle_atomic(w->db, job->base.user_id, items, job->n);
    } else if (w->lock == NULL) {
        snprintf(job->base.out.detail, sizeof job->base.out.detail, "no lock client on this worker");
        base->result = CLAIM_ERROR;
        return;
    } else {
        /* Its whole wait spent in the claim queue: answered like a claim's. */
        int64_t now = cm_now_us();
        if (now >= job->base.deadline_us) {
            metrics_lock_error(LOCK_ERROR_TIMEOUT);
            snprintf(job->base.out.detail, sizeof job->base.out.detail, "its whole wait passed in the claim queue");
            base->result = CLAIM_QUEUE_TIMEOUT;
            return;
        }
        st = bundle_under_locks(w, cfg, the_kind, job, items, job->base.deadline_us, &lock_failed, run_section);
        if (lock_failed != CLAIM_OK) {
            base->result = lock_failed;
            return;
        }
        if (st == DB_STALE_FENCE)
            log_event_line(LOG_WARN, LOG_EV_FENCE_REFUSED, "bundle of %zu coupons: the store refused it whole: %s",
                           job->n, db_errmsg(w->db));
    }
    base->result = from_items(w, job, st, items);
}

void bundle_job_init(bundle_job *job)
{
    memset(job, 0, sizeof *job);
    job->base.run = bundle_run;
}
