/* section.c - the business step and the injected fault between the
 * critical section's read and its write, and the claim's outcome from the
 * section's status (see section.h). */
#include "claim/section.h"

#include <stdatomic.h>
#include <stdio.h>

#include "claim/commit_group.h"
#include "claim/stock_view.h"
#include "common.h"
#include "core/log.h"
#include "core/metrics.h"

/* Claims this server has run through the section, for --fault-pause-ms
 * MS:EVERY (every EVERY-th claim stalls). Process-wide, like a GC pause. */
static atomic_uint_fast64_t claims_seen;

/* --fault-pause-ms MS:signal: set by the SIGUSR1 handler, taken by the next
 * section (a lock-free atomic: safe to store from a signal handler). */
static atomic_int pause_armed;

void section_fault_arm(void)
{
    atomic_store_explicit(&pause_armed, 1, memory_order_relaxed);
}

typedef struct section_step {
    const app_config *cfg;
    int64_t work_start_us; /* stage timing: the business step's start and end (0 = not reached) */
    int64_t work_end_us;
} section_step;

/* The business step and the pause fault. */
static void business_pause(const app_config *cfg, size_t n_claims)
{
    int stall = 0;

    /* The business step: once per section, i.e. once per batch, like one
     * call to another service for the claims decided on this read. */
    if (cfg->work_us > 0)
        (void)cm_sleep_us(cfg->work_us); /* only EINTR can fail it, and that resumes */
    if (cfg->fault_pause_ms == 0)
        return;
    if (cfg->fault_pause_every == 0) {
        /* Armed by a signal: exactly one section takes it. */
        stall = atomic_exchange_explicit(&pause_armed, 0, memory_order_relaxed);
    } else {
        for (size_t i = 0; i < n_claims; i++) {
            uint64_t seen = atomic_fetch_add_explicit(&claims_seen, 1, memory_order_relaxed) + 1;
            if (seen % cfg->fault_pause_every == 0)
                stall = 1;
        }
    }
    /* The fault: a GC pause, a swap storm or a SIGSTOP that outlives the
     * lease. Whoever holds the lock next reads and writes meanwhile; only
     * the fence keeps our stale read from being written afterwards. */
    if (stall) {
        /* Said before the stall, so a script can act while it lasts
         * (scripts/hosts cuts this server off the lock service then). */
        if (cfg->fault_pause_every == 0)
            log_event_line(LOG_WARN, LOG_EV_FAULT, "fault: stalling %u ms inside the critical section (SIGUSR1)",
                           cfg->fault_pause_ms);
        (void)cm_sleep_ms(cfg->fault_pause_ms);
    }
}

/* Between the read and the write, with no transaction open. */
static void business_step(void *arg, size_t n_claims)
{
    section_step *step = arg;

    step->work_start_us = cm_now_us();
    business_pause(step->cfg, n_claims);
    step->work_end_us = cm_now_us();
}

void section_business_step(void *cfg, size_t n_claims)
{
    business_pause(cfg, n_claims);
}

/* What a section that ran (DB_OK: its write, if any, committed) tells the
 * stock view:
 *   - the stock the last accepted claim left;
 *   - else 0 when a claim was refused as sold out (no claim accepted: the
 *     stock read was 0);
 *   - else nothing (every claim at its user's limit says only "positive"). */
static void section_learn(int64_t coupon_id, const db_claim_req *reqs, size_t n)
{
    int64_t left = -1;

    for (size_t i = 0; i < n; i++) {
        if (reqs[i].status == DB_OK && (left < 0 || reqs[i].claim.stock < left))
            left = reqs[i].claim.stock;
        else if (reqs[i].status == DB_SOLD_OUT && left < 0)
            left = 0;
    }
    if (left >= 0)
        stock_view_learn(coupon_id, left);
}

db_status section_run(worker *w, const app_config *cfg, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                      db_claim_req *reqs, size_t n)
{
    section_step step = {cfg, 0, 0};
    /* No business step and no pause fault: nothing runs between the read and
     * the write, and the store may do both in one transaction (on
     * PostgreSQL, one round trip for the whole batch). */
    int idle = cfg->work_us == 0 && cfg->fault_pause_ms == 0;
    int64_t t0 = cm_now_us();

    /* --commit-group: with nothing between the read and the write, the
     * section joins this server's group and shares one transaction with
     * the sections of other coupons held at the same time. */
    db_status st = commit_group_applies(w, cfg, mode)
                       ? commit_group_run(w, cfg, coupon_id, fence, reqs, n)
                       : db_claim_section(w->db, coupon_id, mode, fence, reqs, n, idle ? NULL : business_step, &step);
    int64_t t1 = cm_now_us();
    /* A section without a business step, or refused before it (stale
     * fence, no such coupon, sold out), is booked as read. */
    if (step.work_start_us == 0) {
        metrics_stage_us(STAGE_READ, t1 - t0);
    } else {
        metrics_stage_us(STAGE_READ, step.work_start_us - t0);
        metrics_stage_us(STAGE_WORK, step.work_end_us - step.work_start_us);
        metrics_stage_us(STAGE_COMMIT, t1 - step.work_end_us);
    }
    if (st == DB_OK)
        section_learn(coupon_id, reqs, n);
    return st;
}

claim_result claim_from_req(worker *w, const db_claim_req *req, claim_out *out)
{
    if (req->status == DB_OK) {
        out->rec = req->claim;
    } else if (req->status == DB_SOLD_OUT || req->status == DB_USER_LIMIT) {
        /* Decided in memory from the read: the store's message may be another claim's. */
        snprintf(out->detail, sizeof out->detail, "%s", db_status_str(req->status));
    } else {
        snprintf(out->detail, sizeof out->detail, "%s", db_errmsg(w->db));
    }
    return claim_from_db(req->status);
}

void section_run_each(worker *w, const app_config *cfg, db_group_section *secs, size_t k)
{
    if (!commit_group_applies(w, cfg, cfg->fence)) {
        for (size_t i = 0; i < k; i++) {
            db_group_section *g = &secs[i];
            g->status = section_run(w, cfg, g->coupon_id, cfg->fence, g->fence, g->reqs, g->n);
            g->fault = db_last_fault(w->db);
            snprintf(g->errmsg, sizeof g->errmsg, "%s", g->status == DB_OK ? "" : db_errmsg(w->db));
        }
        return;
    }
    int64_t t0 = cm_now_us();
    commit_group_run_each(w, cfg, secs, k);
    int64_t t1 = cm_now_us();
    for (size_t i = 0; i < k; i++) {
        /* Booked as section_run books a group's section: all of it as read. */
        metrics_stage_us(STAGE_READ, t1 - t0);
        if (secs[i].status == DB_OK)
            section_learn(secs[i].coupon_id, secs[i].reqs, secs[i].n);
    }
}
