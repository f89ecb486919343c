/* strategy_redlock.c - the critical section under libdlock's lock on the
 * resource "coupon:<id>" (single instance with one Redis address, Redlock
 * with several), with the lock's fencing token checked by the store
 * (--fence). libdlock keeps the lock at the key "lock:coupon:<id>" and its
 * fence counter at "fence:coupon:<id>" (dlock.h, "Keys").
 * A batch (the claims of one coupon that waited in its lane, claim/batch.h)
 * shares one acquisition, one read and one write. */
#include "claim/strategy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim/fault.h"
#include "claim/hold_log.h"
#include "common.h"
#include "core/lockstate.h"
#include "core/lockwatch.h"
#include "core/log.h"
#include "core/metrics.h"
#include "claim/section.h"

/* Self-healing after Redis lost the fence counters (a restart without
 * AOF, FLUSHALL): the counters start again at 1 while the coupon row
 * remembers the highest fence it accepted, so every holder is refused as
 * stale, though no other holder exists. A refusal while our lease is still
 * valid can only mean that (an expired lease is the fence doing its job,
 * and is left alone). Then the counters are raised to the row's fence, the
 * lock is taken again (its new fence is above the row's), and the section
 * runs once more with the same claims. Raising never lowers a counter, so this
 * cannot let an older holder through. Returns the section's new status,
 * with *lockp the lock now held (or NULL if the retake failed). */
static db_status heal_fence(worker *w, const app_config *cfg, const char *resource, int64_t coupon_id,
                            int64_t deadline, dlock_lock **lockp, db_claim_req *reqs, size_t n)
{
    db_coupon c;
    uint64_t old = dlock_lock_fence(*lockp);

    if (db_get_coupon(w->db, coupon_id, &c) != DB_OK || c.last_fence <= 0 || (uint64_t)c.last_fence < old)
        return DB_STALE_FENCE;
    dlock_err e = dlock_fence_raise(w->lock, resource, (uint64_t)c.last_fence);
    if (e != DLOCK_OK) {
        char why[DLOCK_ERRSTR_LEN];
        log_event_line(LOG_ERROR, LOG_EV_LOCK_ERROR, "coupon %" PRId64 ": cannot raise the fence counters to %" PRId64
                       ": %s: %s", coupon_id, c.last_fence, dlock_strerror(e),
                       dlock_client_errstr(w->lock, why, sizeof why));
        return DB_STALE_FENCE;
    }
    if (dlock_release(w->lock, *lockp) != DLOCK_OK)
        metrics_lock_release_error();
    dlock_lock_free(*lockp);
    *lockp = NULL;
    /* At least one attempt even past the deadline: the claim was already
     * granted the lock once. */
    e = dlock_acquire(w->lock, resource, cfg->lock_ttl_ms, deadline, lockp);
    lockstate_note_acquire(e);
    if (e != DLOCK_OK) {
        log_event_line(LOG_WARN, LOG_EV_FENCE_HEALED, "coupon %" PRId64 ": fence counters raised to %" PRId64
                       " but the lock was not taken again: %s", coupon_id, c.last_fence, dlock_strerror(e));
        return DB_STALE_FENCE;
    }
    metrics_lock_acquired();
    metrics_fence_healed();
    uint64_t fence = dlock_lock_fence(*lockp);
    log_event_line(LOG_WARN, LOG_EV_FENCE_HEALED, "coupon %" PRId64 ": the store refused fresh fence %" PRIu64
                   " (its last is %" PRId64 "; Redis lost its fence counters?): counters raised, retried with fence %"
                   PRIu64, coupon_id, old, c.last_fence, fence);
    /* The new lock is a hold of its own in the --hold-log history. */
    int64_t held_at_us = hold_log_begin(*lockp);
    db_status st = section_run(w, cfg, coupon_id, cfg->fence, fence, reqs, n);
    hold_log_note(*lockp, held_at_us, st, reqs, n);
    return st;
}

static void log_fence_refused(worker *w, int64_t coupon_id, uint64_t fence, size_t n)
{
    log_event_line(LOG_WARN, LOG_EV_FENCE_REFUSED, "coupon %" PRId64 ": the store refused fence %" PRIu64
                   " for %zu claim(s): %s", coupon_id, fence, n, db_errmsg(w->db));
}

/* A lock taken (not reused): counted, and the crash fault's moment. */
static void note_granted(const app_config *cfg)
{
    metrics_lock_acquired();
    /* --fault-crash-after-lock: dying here leaves the key to its TTL. */
    fault_lock_acquired(cfg);
}

/* Acquires for one batch until deadline (libdlock's clock), counted here
 * so that every batch's acquisition is measured alike. */
static dlock_err take_lock(worker *w, const app_config *cfg, const char *resource, int64_t deadline,
                           dlock_lock **lockp)
{
    dlock_stats before, after;

    dlock_client_stats(w->lock, &before);
    int64_t lock_t0 = cm_now_us();
    dlock_err e = dlock_acquire(w->lock, resource, cfg->lock_ttl_ms, deadline, lockp);
    metrics_stage_us(STAGE_LOCK, cm_now_us() - lock_t0);
    lockstate_note_acquire(e); /* what the claims still waiting will be told, if their wait ends first */
    /* This slot's client serves this thread alone, so the stats delta is
     * exactly this acquisition's retries. */
    dlock_client_stats(w->lock, &after);
    metrics_lock_retries(after.retries - before.retries);
    if (e == DLOCK_OK)
        note_granted(cfg);
    return e;
}

/* Only a section the store decided (sold, sold out, user limit) shows the
 * lease still good for another batch. */
static int section_decided(db_status st)
{
    return st == DB_OK || st == DB_SOLD_OUT || st == DB_USER_LIMIT;
}

/* The lock kept from the coupon's last batch (--lock-cache-ms), only with
 * half the lease left so a healthy batch ends well inside it; NULL: acquire. */
static dlock_lock *reuse_kept(worker *w, const app_config *cfg, const char *resource)
{
    if (cfg->lock_cache_ms == 0)
        return NULL;
    int64_t t0 = cm_now_us();
    dlock_lock *lock = dlock_reuse(w->lock, resource, cfg->lock_ttl_ms / 2);
    if (lock != NULL) {
        metrics_stage_us(STAGE_LOCK, cm_now_us() - t0);
        metrics_lock_held_batch();
    }
    return lock;
}

/* A decided section's lock goes to the cache under --lock-cache-ms:
 * dlock_keep's answer. DLOCK_ERR_ARG: not taken over (no caching, or a
 * section not decided), so the caller releases it. */
static dlock_err keep_decided(worker *w, const app_config *cfg, dlock_lock *lock, db_status st)
{
    if (cfg->lock_cache_ms > 0 && section_decided(st))
        return dlock_keep(w->lock, lock, (unsigned)cfg->lock_cache_ms);
    return DLOCK_ERR_ARG;
}

/* What a keep or release said, counted. The outcomes stand whatever it
 * says, since the write is already committed or refused by its fence. */
static void count_let_go(dlock_err re)
{
    /* LOST: the lease ended first; under --fence full a newer holder's read refused our write. */
    if (re == DLOCK_ERR_LOST)
        metrics_lock_lost();
    else if (re != DLOCK_OK)
        metrics_lock_release_error(); /* the key expires after its TTL */
}

/* Keeps a decided section's lock under --lock-cache-ms, else releases it. */
static void let_go(worker *w, const app_config *cfg, dlock_lock *lock, db_status st)
{
    int64_t release_t0 = cm_now_us();
    dlock_err re = keep_decided(w, cfg, lock, st);

    if (re == DLOCK_ERR_ARG) {
        re = dlock_release(w->lock, lock);
        dlock_lock_free(lock);
    }
    metrics_stage_us(STAGE_RELEASE, cm_now_us() - release_t0);
    count_let_go(re);
}

/* Every claim of a batch whose lock was not taken gets the lock's answer
 * (1005, or 1006 without a quorum: outcome.c). */
static void answer_lock_failure(worker *w, dlock_err e, claim_batch *b)
{
    char why[DLOCK_ERRSTR_LEN];
    int64_t now = cm_now_us();

    const char *text = dlock_client_errstr(w->lock, why, sizeof why);
    for (size_t i = 0; i < b->n; i++) {
        lock_error_kind kind;
        claim_item *it = &b->item[i];
        snprintf(it->out->detail, sizeof it->out->detail, "%s: %s", dlock_strerror(e), text);
        it->result = claim_from_lock(e, &kind);
        metrics_lock_error(kind);
        metrics_lock_wait_us(now - it->queued_us);
    }
}

/* The batch's claims as the store's requests, each claim's lock wait counted. */
static void batch_reqs(const claim_batch *b, db_claim_req *reqs)
{
    int64_t now = cm_now_us();

    memset(reqs, 0, sizeof *reqs * b->n);
    for (size_t i = 0; i < b->n; i++) {
        reqs[i].user_id = b->item[i].user_id;
        metrics_lock_wait_us(now - b->item[i].queued_us);
        /* The claims past the first run under an acquisition they did not wait for. */
        if (i > 0)
            metrics_lock_combined();
    }
}

/* After the section (status st): the fence heal when the store refused a
 * lease still valid, then every claim's answer; *lockp may be replaced. */
static db_status batch_answers(worker *w, const app_config *cfg, const char *resource, int64_t deadline,
                               dlock_lock **lockp, claim_batch *b, db_claim_req *reqs, db_status st)
{
    uint64_t fence = dlock_lock_fence(*lockp);

    if (st == DB_STALE_FENCE && dlock_lock_valid_until_ms(*lockp) > dlock_now_ms()) {
        st = heal_fence(w, cfg, resource, b->coupon_id, deadline, lockp, reqs, b->n);
        if (*lockp != NULL)
            fence = dlock_lock_fence(*lockp);
    }
    if (st == DB_STALE_FENCE)
        log_fence_refused(w, b->coupon_id, fence, b->n);
    for (size_t i = 0; i < b->n; i++) {
        b->item[i].out->fence = fence;
        b->item[i].result = claim_from_req(w, &reqs[i], b->item[i].out);
    }
    return st;
}

/* One fenced read and one write for the whole batch under one fence, so
 * the lock's rounds and the commit are paid once per batch and an outlived
 * lease gets the whole batch refused (1010); *lockp may be replaced (heal_fence). */
static db_status run_locked(worker *w, const app_config *cfg, const char *resource, int64_t deadline,
                            dlock_lock **lockp, claim_batch *b)
{
    db_claim_req reqs[CONFIG_MAX_BATCH];

    batch_reqs(b, reqs);
    int64_t held_at_us = hold_log_begin(*lockp); /* --hold-log: before the write, see hold_log.h */
    db_status st = section_run(w, cfg, b->coupon_id, cfg->fence, dlock_lock_fence(*lockp), reqs, b->n);
    hold_log_note(*lockp, held_at_us, st, reqs, b->n);
    return batch_answers(w, cfg, resource, deadline, lockp, b, reqs, st);
}

/* libdlock counts on its own clock (dlock_now_ms: BOOTTIME), so a
 * deadline on cm_now_us's goes over as "this long from now". */
static int64_t lock_deadline(int64_t deadline_us)
{
    return dlock_now_ms() + (deadline_us - cm_now_us()) / 1000;
}

/* The coupon's lock: kept from its last batch, or acquired until deadline_us
 * (the oldest waiting claim's, so --lock-wait bounds the whole wait). */
static dlock_err lock_coupon(worker *w, const app_config *cfg, int64_t coupon_id, int64_t deadline_us,
                             dlock_lock **lockp)
{
    char resource[64];

    /* One lock per coupon: claims on different coupons never wait for each other. */
    snprintf(resource, sizeof resource, "coupon:%" PRId64, coupon_id);
    *lockp = reuse_kept(w, cfg, resource);
    if (*lockp != NULL)
        return DLOCK_OK;
    return take_lock(w, cfg, resource, lock_deadline(deadline_us), lockp);
}

static void redlock_prepare(const strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                            int64_t deadline_us, claim_batch *b)
{
    (void)self;
    dlock_lock *lock = NULL;
    dlock_err e = lock_coupon(w, cfg, coupon_id, deadline_us, &lock);

    b->prepared = lock;
    b->prepare_err = (int)e;
    b->prepare_busy = e == DLOCK_ERR_TAKEN;
}

static void redlock_claim(const strategy *self, worker *w, const app_config *cfg, claim_batch *b)
{
    (void)self;
    char resource[64];
    dlock_lock *lock = b->prepared;
    dlock_err e = (dlock_err)b->prepare_err;

    /* Without a prepare (its oldest claim was late then), the lock is taken here. */
    if (lock == NULL && e == DLOCK_OK && b->n > 0)
        e = lock_coupon(w, cfg, b->coupon_id, b->deadline_us, &lock);
    b->prepared = NULL;
    if (e != DLOCK_OK) {
        answer_lock_failure(w, e, b);
        return;
    }
    if (lock == NULL)
        return;
    if (b->n == 0) { /* every claim went meanwhile (late, or the server stopping) */
        let_go(w, cfg, lock, DB_ERROR);
        return;
    }
    snprintf(resource, sizeof resource, "coupon:%" PRId64, b->coupon_id);
    /* A kept lock's fence is its acquisition's: the store accepts it again until a newer holder reads. */
    db_status st = run_locked(w, cfg, resource, lock_deadline(b->deadline_us), &lock, b);
    if (lock != NULL)
        let_go(w, cfg, lock, st);
}

/* ---- several coupons in one round (claimq.c's lead_round) ---- */

/* The locks of a round: the kept ones reused, the rest taken in one
 * dlock_try_acquire_each round; rc[i] is coupon i's outcome. */
static void round_locks(worker *w, const app_config *cfg, char (*resource)[64], size_t n, dlock_lock **lock,
                        dlock_err *rc)
{
    const char *names[STRATEGY_ROUND_MAX];
    size_t ask[STRATEGY_ROUND_MAX], k = 0;
    dlock_lock *got[STRATEGY_ROUND_MAX];
    dlock_err got_rc[STRATEGY_ROUND_MAX];

    for (size_t i = 0; i < n; i++) {
        rc[i] = DLOCK_OK;
        if ((lock[i] = reuse_kept(w, cfg, resource[i])) != NULL)
            continue;
        ask[k] = i;
        names[k++] = resource[i];
    }
    if (k == 0)
        return;
    int64_t t0 = cm_now_us();
    dlock_err e = dlock_try_acquire_each(w->lock, names, k, cfg->lock_ttl_ms, got, got_rc);
    metrics_stage_us(STAGE_LOCK, cm_now_us() - t0);
    lockstate_note_acquire(e);
    for (size_t j = 0; j < k; j++) {
        lock[ask[j]] = got[j];
        rc[ask[j]] = got_rc[j];
        if (got_rc[j] == DLOCK_OK)
            note_granted(cfg);
    }
}

/* Lets go of a round's locks: the kept ones to the cache (let_go's rule),
 * the rest released in one dlock_release_each round. */
static void round_let_go(worker *w, const app_config *cfg, dlock_lock **lock, const db_status *st, size_t n)
{
    dlock_lock *rel[STRATEGY_ROUND_MAX];
    dlock_err rc[STRATEGY_ROUND_MAX];
    size_t k = 0;
    int64_t t0 = cm_now_us();

    for (size_t i = 0; i < n; i++) {
        if (lock[i] == NULL)
            continue;
        dlock_err re = keep_decided(w, cfg, lock[i], st[i]);
        if (re == DLOCK_ERR_ARG)
            rel[k++] = lock[i];
        else
            count_let_go(re);
    }
    dlock_err e = k > 0 ? dlock_release_each(w->lock, rel, k, rc) : DLOCK_OK;
    for (size_t j = 0; j < k; j++) {
        count_let_go(e != DLOCK_OK ? e : rc[j]);
        dlock_lock_free(rel[j]);
    }
    metrics_stage_us(STAGE_RELEASE, cm_now_us() - t0);
}

static void redlock_claim_each(const strategy *self, worker *w, const app_config *cfg, claim_batch *const *bs,
                               size_t n)
{
    (void)self;
    char resource[STRATEGY_ROUND_MAX][64];
    dlock_lock *lock[STRATEGY_ROUND_MAX];
    dlock_err rc[STRATEGY_ROUND_MAX];
    db_status st[STRATEGY_ROUND_MAX];
    db_group_section sec[STRATEGY_ROUND_MAX];
    int64_t held_at[STRATEGY_ROUND_MAX];
    size_t idx[STRATEGY_ROUND_MAX], k = 0;
    db_claim_req reqs[STRATEGY_ROUND_MAX][CONFIG_MAX_BATCH];

    for (size_t i = 0; i < n; i++)
        snprintf(resource[i], sizeof resource[i], "coupon:%" PRId64, bs[i]->coupon_id);
    round_locks(w, cfg, resource, n, lock, rc);
    for (size_t i = 0; i < n; i++) {
        st[i] = DB_ERROR;
        if (rc[i] == DLOCK_ERR_TAKEN) {
            bs[i]->prepare_busy = 1; /* held elsewhere: back to its lane, unanswered */
        } else if (rc[i] != DLOCK_OK) {
            answer_lock_failure(w, rc[i], bs[i]);
        } else {
            batch_reqs(bs[i], reqs[i]);
            sec[k] = (db_group_section){.coupon_id = bs[i]->coupon_id, .fence = dlock_lock_fence(lock[i]),
                                        .reqs = reqs[i], .n = bs[i]->n};
            held_at[k] = hold_log_begin(lock[i]);
            idx[k++] = i;
        }
    }
    /* One transaction for all the sections when the commit group applies. */
    section_run_each(w, cfg, sec, k);
    for (size_t j = 0; j < k; j++) {
        size_t i = idx[j];
        /* A group's section ran on whichever connection committed it: its
         * failure is adopted, so claim_from_req reads it from ours. */
        if (sec[j].status != DB_OK)
            db_adopt_error(w->db, sec[j].fault, sec[j].errmsg);
        hold_log_note(lock[i], held_at[j], sec[j].status, reqs[i], bs[i]->n);
        st[i] = batch_answers(w, cfg, resource[i], lock_deadline(bs[i]->deadline_us), &lock[i], bs[i], reqs[i],
                              sec[j].status);
    }
    round_let_go(w, cfg, lock, st, n);
}

static lock_health redlock_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                                  uint32_t *up_mask)
{
    (void)self;
    *nodes = dlock_client_nodes(w->lock);
    dlock_err e = dlock_ping_nodes(w->lock, up_mask);
    *nodes_up = 0;
    for (uint32_t m = *up_mask; m != 0; m &= m - 1)
        (*nodes_up)++;
    /* Every probe feeds the node log and gauges, not only the watch thread's. */
    lockwatch_observe(w->cfg, *up_mask, *nodes);
    return e == DLOCK_OK ? LOCK_HEALTH_OK : LOCK_HEALTH_DOWN;
}

const strategy strategy_redlock = {
    .name = "redlock",
    .summary = "the critical section under libdlock's lock, fenced (the right way)",
    .uses_lock = 1,
    .default_threads = 32,
    /* A coupon's claims wait in its lane for their one leader, so a batch
     * is not bounded by the workers; and the fewer the workers, the more
     * coupons each round serves: 2, one per core of the machine measured
     * (benchmarks.md, "Many coupons on SQLite"). */
    .default_claim_workers = 2,
    .stock_falls = STOCK_FALLS_FENCED,
    .prepare = redlock_prepare,
    .claim = redlock_claim,
    .claim_each = redlock_claim_each,
    .health = redlock_health,
};
