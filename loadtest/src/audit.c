/* audit.c - the oversell verdict: the contract's oversold conditions on every
 * view of the coupon (each server, the DB), the successes-vs-issued
 * cross-check, and agreement between servers and the DB. */
#include "loadtest.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Record one finding when excess > 0; N is the largest excess of all. */
static void add(lt_audit *a, int64_t excess, const char *fmt, ...)
{
    va_list ap;
    if (excess <= 0)
        return;
    if (excess > a->oversold_by)
        a->oversold_by = excess;
    if (a->n_findings >= LT_FINDINGS_MAX) {
        a->findings_dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(a->findings[a->n_findings].what, sizeof a->findings[0].what, fmt, ap);
    va_end(ap);
    a->findings[a->n_findings].excess = excess;
    a->n_findings++;
}

/* The contract's definition of oversold, on one view. */
static void check_view(lt_audit *a, const lt_coupon_view *v)
{
    if (!v->ok)
        return;
    add(a, v->issued - v->total, "%s: issued %" PRId64 " > total %" PRId64, v->source, v->issued,
        v->total);
    add(a, -v->stock, "%s: stock %" PRId64 " < 0", v->source, v->stock);
    add(a, abs64(v->stock + v->issued - v->total),
        "%s: stock %" PRId64 " + issued %" PRId64 " != total %" PRId64, v->source, v->stock,
        v->issued, v->total);
    if (v->has_users && v->per_user_limit > 0)
        add(a, v->excess_records,
            "%s: %" PRId64 " user(s) over per_user_limit %" PRId64 ", %" PRId64 " excess record(s)",
            v->source, v->users_over_limit, v->per_user_limit, v->excess_records);
}

/* Every code-0 answer must be exactly one new record: a success the client
 * saw but the store lacks was lost; a record nobody was told about was
 * invented (or claimed by someone else during the run). */
static void check_delta(lt_audit *a, const lt_coupon_view *before, const lt_coupon_view *after)
{
    int64_t delta, seen;
    if (!before->ok || !after->ok)
        return;
    delta = after->issued - before->issued;
    seen = (int64_t)a->successes_seen;
    add(a, abs64(seen - delta),
        "%s: %" PRId64 " successes seen but issued went %" PRId64 " -> %" PRId64
        " (%s; %" PRIu64 " transport errors)",
        after->source, seen, before->issued, after->issued,
        seen > delta ? "a success not recorded" : "a record nobody was told of",
        a->transport_errors);
}

/* Two views of one coupon must agree once the load has stopped. */
static void check_agree(lt_audit *a, const lt_coupon_view *v, const lt_coupon_view *ref)
{
    int64_t d;
    if (!v->ok || !ref->ok)
        return;
    d = abs64(v->total - ref->total);
    if (abs64(v->stock - ref->stock) > d)
        d = abs64(v->stock - ref->stock);
    if (abs64(v->issued - ref->issued) > d)
        d = abs64(v->issued - ref->issued);
    add(a, d,
        "%s says total/stock/issued %" PRId64 "/%" PRId64 "/%" PRId64 " but %s says %" PRId64
        "/%" PRId64 "/%" PRId64,
        v->source, v->total, v->stock, v->issued, ref->source, ref->total, ref->stock, ref->issued);
}

void lt_audit_evaluate(lt_audit *a)
{
    a->n_findings = 0;
    a->findings_dropped = 0;
    a->oversold_by = 0;
    a->incomplete = 0;

    for (size_t i = 0; i < a->n_after; i++) {
        if (!a->after[i].ok)
            a->incomplete = 1;
        check_view(a, &a->after[i]);
    }
    if (a->have_db) {
        if (!a->db_after.ok)
            a->incomplete = 1;
        check_view(a, &a->db_after);
    }

    /* Same source before and after, so a stale replica cannot fake a delta. */
    if (a->n_after > 0)
        check_delta(a, &a->before, &a->after[0]);
    if (a->have_db)
        check_delta(a, &a->db_before, &a->db_after);

    for (size_t i = 0; i < a->n_after; i++) {
        if (a->have_db)
            check_agree(a, &a->after[i], &a->db_after);
        else if (i > 0)
            check_agree(a, &a->after[i], &a->after[0]);
    }

    /* STUCK: safe but standing still. Stock is left, claims kept coming, and
     * not one got through: each waited out the lock and was refused 1005.
     * That is a lock nobody holds any more and nobody can take (a dead
     * holder's key with no TTL, or a TTL the waiters keep re-arming). */
    const lt_coupon_view *now = a->have_db ? &a->db_after : (a->n_after > 0 ? &a->after[0] : NULL);
    a->stuck = a->oversold_by == 0 && !a->incomplete && now != NULL && now->ok && now->stock > 0 &&
               a->answered > 0 && a->successes_seen == 0 && a->lock_refusals == a->answered;
}

void lt_audit_free(lt_audit *a)
{
    if (a == NULL)
        return;
    free(a->after);
    a->after = NULL;
    a->n_after = 0;
}
