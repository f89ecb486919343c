/* strategy_redlock.c - the critical section under libdlock's lock on the
 * resource "coupon:<id>" (single instance with one Redis address, Redlock
 * with several), with the lock's fencing token checked by the store
 * (--fence). libdlock keeps the lock at the key "lock:coupon:<id>" and its
 * fence counter at "fence:coupon:<id>" (dlock.h, "Keys").
 * Same-coupon claims of this server queue locally first (combiner.h) and,
 * with --lock-batch > 1, share one acquisition, one read and one write. */
#include "claim/strategy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim/claimq.h"
#include "claim/combiner.h"
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

/* The claims of one batch besides the leader's own: each either waited
 * in the local queue on a claim worker of its own (combined), or was taken
 * straight out of the claim queue (job) and is answered by the leader. */
typedef struct batch {
    db_claim_req reqs[CONFIG_MAX_BATCH];
    combine_req *combined[CONFIG_MAX_BATCH];
    claim_job *job[CONFIG_MAX_BATCH];
    size_t n;
} batch;

/* A claim taken into the batch: its wait for the lock is over. */
static void note_taken(int64_t t0_us, int local)
{
    int64_t taken_us = cm_now_us();

    metrics_lock_wait_us(taken_us - t0_us);
    if (local)
        metrics_stage_us(STAGE_LOCAL_QUEUE, taken_us - t0_us);
    metrics_lock_combined();
}

static void add_combined(batch *b, combine_req *r)
{
    note_taken(r->t0_us, 1);
    b->combined[b->n] = r;
    b->job[b->n] = NULL;
    b->reqs[b->n].user_id = r->user_id;
    b->n++;
}

/* Fills the batch up to --lock-batch with claims of coupon_id waiting in
 * this server: first those on claim workers in the local queue (they came
 * first), then those still in the claim queue, which thus need no claim
 * worker's wake-up of their own. */
static void take_queued(const app_config *cfg, int64_t coupon_id, batch *b)
{
    size_t max = (size_t)cfg->lock_batch;

    while (b->n < max) {
        combine_req *r = combiner_take(coupon_id);
        if (r == NULL)
            break;
        add_combined(b, r);
    }
    if (b->n >= max)
        return;
    size_t got = claimq_take_coupon(coupon_id, &b->job[b->n], max - b->n);
    for (size_t i = b->n; i < b->n + got; i++) {
        note_taken(b->job[i]->queued_us, 0);
        b->combined[i] = NULL;
        b->reqs[i].user_id = b->job[i]->user_id;
    }
    b->n += got;
}

/* Answers the batch's claims from index from on with their outcomes under fence. */
static void complete_batch(worker *w, uint64_t fence, batch *b, size_t from)
{
    for (size_t i = from; i < b->n; i++) {
        if (b->combined[i] != NULL) {
            b->combined[i]->out->fence = fence;
            combiner_complete(b->combined[i], claim_from_req(w, &b->reqs[i], b->combined[i]->out));
        } else {
            claim_job *job = b->job[i];
            job->out.fence = fence;
            job->result = claim_from_req(w, &b->reqs[i], &job->out);
            job->done(job); /* the last touch (claimq.h) */
        }
    }
}

/* The store ran the batch's section and decided each claim (sold, sold out,
 * or at its user's limit): the lock is still ours to use for another batch. */
static int section_decided(db_status st)
{
    return st == DB_OK || st == DB_SOLD_OUT || st == DB_USER_LIMIT;
}

static void log_fence_refused(worker *w, int64_t coupon_id, uint64_t fence, size_t n, const char *which)
{
    log_event_line(LOG_WARN, LOG_EV_FENCE_REFUSED, "coupon %" PRId64 ": the store refused fence %" PRIu64
                   " for %zu claim(s)%s: %s", coupon_id, fence, n, which, db_errmsg(w->db));
}

/* --lock-hold-ms: after the first batch, more batches under the same lease
 * instead of a release and a new acquisition each. On a hot coupon the
 * claims of this server's connections come back within about a millisecond
 * of their answers. Handing the lock to the other server and back costs a
 * release and an acquiring round on the masters plus two wake-ups
 * (benchmarks.md, "Hot coupon on SQLite"). Each batch starts only while
 * the hold bound is not reached, so the other servers' waiters (in
 * libdlock's wake queue) get the lock within about MS. It also starts only
 * while half the lease is left, so a healthy batch ends well inside the
 * lease. A batch that outlives it anyway (a pause, a SIGSTOP) is what the
 * fence is for. Every batch carries the acquisition's fence: the store
 * accepts it again from the same holder (last_fence <= fence) and refuses
 * it once a newer holder has read (1010, the batch not applied), which
 * ends the hold. */
static void hold_batches(worker *w, const app_config *cfg, const dlock_lock *lock, int64_t coupon_id)
{
    batch b;
    uint64_t fence = dlock_lock_fence(lock);
    int64_t hold_end = dlock_now_ms() + cfg->lock_hold_ms;
    int64_t margin = (int64_t)cfg->lock_ttl_ms / 2;

    for (;;) {
        int64_t until = dlock_lock_valid_until_ms(lock) - margin;
        if (until > hold_end)
            until = hold_end;
        if (!dlock_is_held(lock) || dlock_now_ms() >= until)
            break;
        memset(&b, 0, sizeof b);
        take_queued(cfg, coupon_id, &b);
        if (b.n == 0) {
            combine_req *first = combiner_take_wait(coupon_id, until);
            if (first == NULL)
                break;
            add_combined(&b, first);
            take_queued(cfg, coupon_id, &b);
        }
        metrics_lock_held_batch();
        int64_t at_us = hold_log_begin(lock); /* each batch is a hold of its own in --hold-log */
        db_status st = section_run(w, cfg, coupon_id, cfg->fence, fence, b.reqs, b.n);
        hold_log_note(lock, at_us, st, b.reqs, b.n);
        if (st == DB_STALE_FENCE)
            log_fence_refused(w, coupon_id, fence, b.n, " held over from an earlier batch");
        complete_batch(w, fence, &b, 0);
        if (!section_decided(st))
            break; /* refused or failed: the next batch goes through a new acquisition */
    }
}

/* The section under a held lock: our claim plus, with --lock-batch > 1,
 * claims of this coupon queued behind us in this server (combiner.h), with
 * one fenced read and one write for all of them (group commit). The lock's
 * round trips and the commit are paid once per batch. They all carry our
 * fence. So if our lease runs out mid-way (a pause, a SIGSTOP) and a newer
 * holder reads the coupon, the store refuses the whole batch (1010) and
 * nothing of it is applied. Then, with --lock-hold-ms, more batches under
 * the same lock (hold_batches). *lockp may be replaced (heal_fence). */
static claim_result run_locked(worker *w, const app_config *cfg, const char *resource, int64_t deadline,
                               dlock_lock **lockp, int64_t coupon_id, const char *user_id, claim_out *out,
                               int leading)
{
    batch b;
    uint64_t fence = dlock_lock_fence(*lockp);
    int64_t held_at_us = hold_log_begin(*lockp); /* --hold-log: before the write, see hold_log.h */

    memset(&b, 0, sizeof b);
    b.reqs[0].user_id = user_id;
    b.n = 1;
    /* Taken right after the acquisition, while the lease is fresh; the
     * batch size bounds how long one server keeps the lock from the others. */
    if (leading)
        take_queued(cfg, coupon_id, &b);

    db_status st = section_run(w, cfg, coupon_id, cfg->fence, fence, b.reqs, b.n);
    hold_log_note(*lockp, held_at_us, st, b.reqs, b.n);
    if (st == DB_STALE_FENCE && dlock_lock_valid_until_ms(*lockp) > dlock_now_ms()) {
        st = heal_fence(w, cfg, resource, coupon_id, deadline, lockp, b.reqs, b.n);
        if (*lockp != NULL)
            fence = dlock_lock_fence(*lockp);
    }
    if (st == DB_STALE_FENCE)
        log_fence_refused(w, coupon_id, fence, b.n, "");
    complete_batch(w, fence, &b, 1);
    out->fence = fence;
    /* Decided before any held batch: it reads the store's last message. */
    claim_result result = claim_from_req(w, &b.reqs[0], out);
    if (leading && cfg->lock_hold_ms > 0 && *lockp != NULL && section_decided(st))
        hold_batches(w, cfg, *lockp, coupon_id);
    return result;
}

/* ---- several coupons in one round ----
 *
 * When claims of other coupons wait in this worker's claim queue too, a
 * leader takes them along: one dlock_try_acquire_each round for every
 * coupon's lock, each granted coupon's section in one commit group (a
 * savepoint each), one dlock_release_each round. With claims spread over
 * many coupons a holder carries about one claim, so the acquire and
 * release rounds on the masters, not the store, were what each claim paid
 * (benchmarks.md, "Many coupons"); here a round serves several coupons. A
 * coupon whose lock is taken (another server holds it) is not waited for
 * here: its claims go back to the queue for the single path, which waits
 * for the hand-off as before. With claims of one coupon only (the hot
 * coupon) nothing of this runs. */

/* The coupons of one spread round; [0] is the leader's own. */
typedef struct spread {
    int64_t coupon[CLAIMQ_SPREAD_MAX];
    char resource[CLAIMQ_SPREAD_MAX][64];
    const char *names[CLAIMQ_SPREAD_MAX];
    batch b[CLAIMQ_SPREAD_MAX];
    dlock_lock *lock[CLAIMQ_SPREAD_MAX];
    dlock_err rc[CLAIMQ_SPREAD_MAX];
    db_group_section sec[CLAIMQ_SPREAD_MAX];
    size_t n;
} spread;

/* claimq_take_spread's want(): a coupon is taken along only if no claim
 * of this server leads it now (combiner.h), and then we lead it. */
static int spread_want(int64_t coupon_id, void *arg)
{
    spread *sp = arg;

    if (sp->n == CLAIMQ_SPREAD_MAX || !combiner_try_lead(coupon_id))
        return 0;
    sp->coupon[sp->n++] = coupon_id;
    return 1;
}

/* Takes the other coupons' waiting claims into sp (sp->b[i] holds coupon
 * i's jobs); a coupon led but with no claim left (they were late) is let
 * go. Returns sp->n. */
static size_t spread_gather(const app_config *cfg, int64_t coupon_id, spread *sp)
{
    claim_job *jobs[CLAIMQ_TAKE_MAX];
    size_t got, kept = 1;

    sp->coupon[0] = coupon_id;
    sp->n = 1;
    got = claimq_take_spread(coupon_id, spread_want, sp, CLAIMQ_SPREAD_MAX - 1, (size_t)cfg->lock_batch, jobs,
                             CLAIMQ_TAKE_MAX);
    for (size_t j = 0; j < got; j++) {
        for (size_t i = 1; i < sp->n; i++) {
            if (sp->coupon[i] != jobs[j]->coupon_id)
                continue;
            batch *b = &sp->b[i];
            note_taken(jobs[j]->queued_us, 0);
            b->job[b->n] = jobs[j];
            b->combined[b->n] = NULL;
            b->reqs[b->n].user_id = jobs[j]->user_id;
            b->n++;
            break;
        }
    }
    for (size_t i = 1; i < sp->n; i++) {
        if (sp->b[i].n == 0) {
            combiner_leave(sp->coupon[i]);
            continue;
        }
        if (kept != i) {
            sp->coupon[kept] = sp->coupon[i];
            sp->b[kept] = sp->b[i];
        }
        kept++;
    }
    sp->n = kept;
    return sp->n;
}

/* The sections of the granted coupons (rc OK): in one commit group when it
 * applies, else one by one; then the fence heal (as run_locked) and the
 * answers. Coupon 0's claim 0 is the caller's own, answered by the caller. */
static void spread_sections(worker *w, const app_config *cfg, int64_t deadline, spread *sp)
{
    int64_t held_at[CLAIMQ_SPREAD_MAX];
    size_t idx[CLAIMQ_SPREAD_MAX], k = 0;

    for (size_t i = 0; i < sp->n; i++) {
        if (sp->rc[i] != DLOCK_OK)
            continue;
        sp->sec[k] = (db_group_section){.coupon_id = sp->coupon[i],
                                        .fence = dlock_lock_fence(sp->lock[i]),
                                        .reqs = sp->b[i].reqs, .n = sp->b[i].n};
        held_at[k] = hold_log_begin(sp->lock[i]);
        idx[k++] = i;
    }
    section_run_each(w, cfg, sp->sec, k);
    for (size_t j = 0; j < k; j++) {
        size_t i = idx[j];
        db_status st = sp->sec[j].status;
        uint64_t fence = sp->sec[j].fence;

        /* A group's section ran on whichever connection committed it: its
         * failure is adopted here, so claim_from_req reads it from ours. */
        if (st != DB_OK)
            db_adopt_error(w->db, sp->sec[j].fault, sp->sec[j].errmsg);
        hold_log_note(sp->lock[i], held_at[j], st, sp->b[i].reqs, sp->b[i].n);
        if (st == DB_STALE_FENCE && dlock_lock_valid_until_ms(sp->lock[i]) > dlock_now_ms()) {
            st = heal_fence(w, cfg, sp->resource[i], sp->coupon[i], deadline, &sp->lock[i], sp->b[i].reqs,
                            sp->b[i].n);
            if (sp->lock[i] != NULL)
                fence = dlock_lock_fence(sp->lock[i]);
        }
        if (st == DB_STALE_FENCE)
            log_fence_refused(w, sp->coupon[i], fence, sp->b[i].n, " (several coupons' round)");
        sp->sec[j].fence = fence;
        complete_batch(w, fence, &sp->b[i], i == 0 ? 1 : 0);
    }
}

/* Releases every lock still held in sp in one round. */
static void spread_release(worker *w, spread *sp)
{
    dlock_lock *held[CLAIMQ_SPREAD_MAX];
    dlock_err rcs[CLAIMQ_SPREAD_MAX];
    size_t k = 0;

    for (size_t i = 0; i < sp->n; i++)
        if (sp->rc[i] == DLOCK_OK && sp->lock[i] != NULL)
            held[k++] = sp->lock[i];
    if (k == 0)
        return;
    int64_t release_t0 = cm_now_us();
    /* As the single path: every outcome stands whatever the release says. */
    if (dlock_release_each(w->lock, held, k, rcs) != DLOCK_OK) {
        for (size_t j = 0; j < k; j++)
            metrics_lock_release_error();
    } else {
        for (size_t j = 0; j < k; j++) {
            if (rcs[j] == DLOCK_ERR_LOST)
                metrics_lock_lost();
            else if (rcs[j] != DLOCK_OK)
                metrics_lock_release_error();
        }
    }
    metrics_stage_us(STAGE_RELEASE, cm_now_us() - release_t0);
}

/* The leader of coupon_id with claims of other coupons waiting: one round
 * for all their locks. Returns 1 when the leader's own claim was answered
 * here (*result, out). Returns 0 when it goes the single path: only its
 * coupon had claims waiting, or its lock was taken or unavailable (then the
 * other coupons were served or given back first, and nothing is held). */
static int spread_claim(worker *w, const app_config *cfg, int64_t coupon_id, const char *user_id, int64_t t0,
                        int64_t deadline, claim_out *out, claim_result *result)
{
    spread *sp = calloc(1, sizeof *sp);
    int handled = 0;

    /* Out of memory: the single path needs none of this. */
    if (sp == NULL)
        return 0;
    if (spread_gather(cfg, coupon_id, sp) == 1)
        goto out;
    for (size_t i = 0; i < sp->n; i++) {
        snprintf(sp->resource[i], sizeof sp->resource[i], "coupon:%" PRId64, sp->coupon[i]);
        sp->names[i] = sp->resource[i];
    }
    int64_t lock_t0 = cm_now_us();
    dlock_err e = dlock_try_acquire_each(w->lock, sp->names, sp->n, cfg->lock_ttl_ms, sp->lock, sp->rc);
    metrics_stage_us(STAGE_LOCK, cm_now_us() - lock_t0);
    metrics_lock_spread_round(sp->n);
    lockstate_note_acquire(e);
    for (size_t i = 0; i < sp->n; i++) {
        if (sp->rc[i] == DLOCK_OK) {
            metrics_lock_acquired();
            fault_lock_acquired(cfg);
            continue;
        }
        if (i == 0)
            continue; /* the caller's single path waits for it */
        /* Taken (or unavailable): back to the queue for the single path,
         * which waits for the hand-off; this stripe is free again. */
        claimq_give_back(sp->b[i].job, sp->b[i].n);
        combiner_leave(sp->coupon[i]);
    }
    if (sp->rc[0] == DLOCK_OK) {
        metrics_lock_wait_us(cm_now_us() - t0);
        sp->b[0].reqs[0].user_id = user_id;
        sp->b[0].n = 1;
        take_queued(cfg, coupon_id, &sp->b[0]);
    }
    for (size_t i = 1; i < sp->n; i++)
        if (sp->rc[i] == DLOCK_OK)
            take_queued(cfg, sp->coupon[i], &sp->b[i]);
    spread_sections(w, cfg, deadline, sp);
    if (sp->rc[0] == DLOCK_OK) {
        out->fence = sp->sec[0].fence;
        *result = claim_from_req(w, &sp->b[0].reqs[0], out);
        handled = 1;
    }
    spread_release(w, sp);
    for (size_t i = 0; i < sp->n; i++) {
        dlock_lock_free(sp->lock[i]);
        /* After the release, as the single path (combiner_leave there). */
        if (i > 0 && sp->rc[i] == DLOCK_OK)
            combiner_leave(sp->coupon[i]);
    }
out:
    free(sp);
    return handled;
}

static claim_result redlock_claim(const strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                                  const char *user_id, int64_t deadline_us, claim_out *out)
{
    (void)self;
    claim_result result = CLAIM_ERROR;
    dlock_lock *lock = NULL;
    dlock_stats before, after;
    combine_req me;
    int combining = 0, leading = 0;
    char resource[64];

    out->fence = 0;
    /* One deadline covers the claim queue, the local queue and the Redis
     * attempts together, so --lock-wait bounds the whole wait the client
     * sees. libdlock counts on its own clock (dlock_now_ms: BOOTTIME), so
     * the deadline goes over as "this long from now". */
    int64_t t0 = cm_now_us();
    int64_t deadline = dlock_now_ms() + (deadline_us - t0) / 1000;
    if (combine_req_init(&me, coupon_id, user_id, out, t0) == 0) {
        combining = 1;
        join_result j = combiner_join(&me, deadline);
        /* A combined claim's wait was counted by the leader that took it. */
        if (j != JOIN_DONE)
            metrics_stage_us(STAGE_LOCAL_QUEUE, cm_now_us() - t0);
        if (j == JOIN_DONE) {
            result = me.result;
            goto out;
        }
        if (j == JOIN_TIMEOUT) {
            lock_error_kind kind;
            dlock_err seen = lockstate_last();
            metrics_lock_wait_us(cm_now_us() - t0);
            result = claim_from_wait(CLAIM_LOCK_TIMEOUT, seen, &kind); /* 1005, or 1006 without quorum */
            metrics_lock_error(kind);
            if (result == CLAIM_LOCK_TIMEOUT)
                snprintf(out->detail, sizeof out->detail, "queued behind other claims of this server");
            else
                snprintf(out->detail, sizeof out->detail,
                         "queued behind other claims of this server while the lock service failed: %s",
                         dlock_strerror(seen));
            goto out;
        }
        leading = 1;
    }
    /* Claims of other coupons waiting too: one round for all (above). */
    if (leading && cfg->lock_batch > 1 && spread_claim(w, cfg, coupon_id, user_id, t0, deadline, out, &result))
        goto out;

    /* One lock per coupon: claims on different coupons never wait for each other. */
    snprintf(resource, sizeof resource, "coupon:%" PRId64, coupon_id);
    dlock_client_stats(w->lock, &before);
    int64_t lock_t0 = cm_now_us();
    dlock_err e = dlock_acquire(w->lock, resource, cfg->lock_ttl_ms, deadline, &lock);
    metrics_stage_us(STAGE_LOCK, cm_now_us() - lock_t0);
    lockstate_note_acquire(e); /* what the claims still waiting will be told, if their wait ends first */
    metrics_lock_wait_us(cm_now_us() - t0);
    /* This slot's client serves this thread alone right now, so the stats
     * delta is exactly this acquisition's retries. */
    dlock_client_stats(w->lock, &after);
    metrics_lock_retries(after.retries - before.retries);
    if (e != DLOCK_OK) {
        lock_error_kind kind;
        char why[DLOCK_ERRSTR_LEN];
        snprintf(out->detail, sizeof out->detail, "%s: %s", dlock_strerror(e),
                 dlock_client_errstr(w->lock, why, sizeof why));
        result = claim_from_lock(e, &kind); /* 1005 or 1006: outcome.c */
        metrics_lock_error(kind);
        goto out;
    }
    metrics_lock_acquired();
    /* --fault-crash-after-lock: dying here leaves the key to its TTL. */
    fault_lock_acquired(cfg);
    result = run_locked(w, cfg, resource, deadline, &lock, coupon_id, user_id, out, leading);

    /* Every outcome stands whatever the release says: the write is already
     * committed or refused. LOST means the lease ended before we released:
     * under --fence full the store refused our write if a newer holder had
     * read in the meantime, so it is counted, not turned into an error
     * (under --fence off or write, this is the window that oversells). Any
     * other failure leaves the key to expire after its TTL. */
    int64_t release_t0 = cm_now_us();
    dlock_err re = lock != NULL ? dlock_release(w->lock, lock) : DLOCK_OK;
    metrics_stage_us(STAGE_RELEASE, cm_now_us() - release_t0);
    if (re == DLOCK_ERR_LOST)
        metrics_lock_lost();
    else if (re != DLOCK_OK)
        metrics_lock_release_error();
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
    /* A batch's leader takes its coupon's claims straight out of the claim
     * queue (claimq_take_coupon), so a batch is not bounded by the workers
     * and a claim taken so costs no worker's wake-up: fewer workers leave
     * more claims there. 8 as atomic-sql's, so claims of different coupons
     * still run 8 at a time (benchmarks.md, "Hot coupon on SQLite"). */
    .default_claim_workers = 8,
    .stock_falls = STOCK_FALLS_FENCED,
    .claim = redlock_claim,
    .health = redlock_health,
};
