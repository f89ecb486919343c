/* multi.c - several resources as one lock: dlock_acquire_multi (all of the
 * resources or none, one script round per attempt). The keys of such a
 * lock are named in keys.c, its release round is release.c's and its
 * extension extend.c's (renewal goes through extend.c, so it needs nothing
 * here).
 *
 * Why one script over every key, and not one dlock_acquire per resource in
 * a fixed order: a script is atomic on its node. So a node grants the whole
 * set or nothing, and a caller never holds part of a set while it waits
 * for the rest. Without that hold-and-wait, two callers asking for {a,b}
 * and {b,a} cannot deadlock whatever their order, and a failed attempt
 * leaves nothing behind for others to trip over (docs/single-instance.md,
 * "Several resources at once"; tests/lock/multi.c). */
#include "protocol.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- acquire ---- */

/* multi_acquire.lua's answers: {1, fence_1..fence_n} = the whole set is
 * ours on that node; {0, i} = resource i (1-based) is held there, nothing
 * was set. */
static int granted(const dlock__result *r, size_t n)
{
    const redisReply *x = r->reply;

    if (r->status != DLOCK__R_REPLY || x->type != REDIS_REPLY_ARRAY || x->elements != n + 1 ||
        x->element[0]->type != REDIS_REPLY_INTEGER || x->element[0]->integer != 1)
        return 0;
    for (size_t i = 1; i <= n; i++)
        if (x->element[i]->type != REDIS_REPLY_INTEGER || x->element[i]->integer <= 0)
            return 0;
    return 1;
}

/* 0 when not refused, else the 1-based index of the held resource. */
static size_t refused_at(const dlock__result *r, size_t n)
{
    const redisReply *x = r->reply;

    if (r->status != DLOCK__R_REPLY || x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        x->element[0]->type != REDIS_REPLY_INTEGER || x->element[0]->integer != 0 ||
        x->element[1]->type != REDIS_REPLY_INTEGER || x->element[1]->integer < 1 ||
        (size_t)x->element[1]->integer > n)
        return 0;
    return (size_t)x->element[1]->integer;
}

/* The handle: dlock__lock_grant for resource 0 (which checks the
 * validity left), plus every name and fence. */
static dlock_err multi_grant(const dlock_client *c, const char *const *names, size_t n,
                             const uint64_t *fences, const dlock__grant *g, char *errbuf,
                             dlock_lock **out)
{
    dlock_lock *lock = NULL;
    dlock_err rc = dlock__lock_grant(c, g, errbuf, &lock);
    dlock__multi *m;

    if (rc != DLOCK_OK)
        return rc;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto fail;
    lock->multi = m;
    m->names = calloc(n, sizeof(*m->names));
    m->fences = calloc(n, sizeof(*m->fences));
    if (m->names == NULL || m->fences == NULL)
        goto fail;
    m->names[0] = lock->resource;
    m->fences[0] = fences[0];
    /* n stays at the names made so far, so a failure frees exactly those. */
    m->n = 1;
    for (size_t i = 1; i < n; i++) {
        m->names[i] = strdup(names[i]);
        if (m->names[i] == NULL)
            goto fail;
        m->fences[i] = fences[i];
        m->n = i + 1;
    }
    *out = lock;
    return DLOCK_OK;
fail:
    dlock__lock_destroy(lock);
    dlock__errf(errbuf, "out of memory for the lock handle");
    return DLOCK_ERR_NOMEM;
}

int dlock__multi_decided(const dlock__result *res, size_t nodes, void *arg)
{
    const dlock__multi_quorum *d = arg;
    size_t ok = 0;

    for (size_t i = 0; i < nodes; i++)
        ok += (size_t)granted(&res[i], d->n);
    return ok >= d->quorum;
}

dlock_err dlock__multi_prepare(dlock_client *c, dlock__multi_attempt *m,
                               const char *const *names, size_t n, uint32_t ttl_ms,
                               dlock__multi_keys *mk, char *errbuf)
{
    memset(m, 0, sizeof(*m));
    m->names = names;
    m->n = n;
    m->ttl_ms = ttl_ms;
    m->mk = mk;
    m->dq.quorum = c->quorum;
    m->dq.n = n;
    m->args[0] = m->token;
    m->args[1] = m->ttl_s;
    mk->args[0] = m->token;
    snprintf(m->ttl_s, sizeof(m->ttl_s), "%" PRIu32, ttl_ms);
    /* A fresh token per acquisition (acquire.c says why). */
    if (dlock__token_new(m->token) != 0) {
        dlock__errf(errbuf, "no randomness for the token");
        return DLOCK_ERR_NOMEM;
    }
    /* As for one resource: every key is set at or after t0. */
    m->t0 = dlock_now_ms();
    return DLOCK_OK;
}

/* The fence sync of acquire.c (why: see fence_lagging there), per
 * resource: the nodes of the quorum whose counters are below the fences
 * for any resource get every counter raised (multi_fence_sync.lua only
 * ever raises). */
static uint32_t fences_lagging(const dlock_client *c, dlock__multi_attempt *m,
                               const dlock__result *res)
{
    uint32_t lagging = 0;

    for (size_t i = 0; i < c->n; i++) {
        int behind = 0;

        if (!(m->ok_mask & (1u << i)))
            continue;
        for (size_t j = 0; j < m->n; j++)
            behind |= (uint64_t)res[i].reply->element[j + 1]->integer != m->fences[j];
        if (behind)
            lagging |= 1u << i;
        else
            m->synced |= 1u << i;
    }
    for (size_t j = 0; j < m->n; j++) {
        snprintf(m->fence_s[j], sizeof(m->fence_s[j]), "%" PRIu64, m->fences[j]);
        m->sync_args[j] = m->fence_s[j];
    }
    return lagging;
}

dlock_err dlock__multi_decide(dlock_client *c, dlock__multi_attempt *m, const dlock__result *res,
                              uint32_t *lagging, char *errbuf)
{
    dlock_err rc;

    *lagging = 0;
    for (size_t i = 0; i < c->n; i++) {
        size_t at;

        if (granted(&res[i], m->n)) {
            m->ok_mask |= 1u << i;
            for (size_t j = 0; j < m->n; j++)
                if ((uint64_t)res[i].reply->element[j + 1]->integer > m->fences[j])
                    m->fences[j] = (uint64_t)res[i].reply->element[j + 1]->integer;
        } else if ((at = refused_at(&res[i], m->n)) != 0) {
            m->answered |= 1u << i;
            m->busy = at;
        } else if (res[i].status != DLOCK__R_DOWN && res[i].status != DLOCK__R_AUTH) {
            /* Unknown outcome or an error after some SETs: the set may be
             * ours there (acquire.c, the same case). */
            m->maybe_mask |= 1u << i;
        }
    }
    m->answered |= m->ok_mask;
    rc = dlock__attempt_verdict(c, m->ok_mask, m->answered, res, errbuf);
    if (rc == DLOCK_OK)
        *lagging = fences_lagging(c, m, res);
    else if (rc == DLOCK_ERR_TAKEN)
        dlock__errf(errbuf,
                    "\"%s\" (resource %zu of %zu) is held by another owner (the whole set "
                    "granted on %zu/%zu nodes, quorum %zu)",
                    m->busy > 0 ? m->names[m->busy - 1] : "?", m->busy > 0 ? m->busy - 1 : 0,
                    m->n, dlock__popcount(m->ok_mask), c->n, c->quorum);
    return rc;
}

dlock_err dlock__multi_grant(dlock_client *c, dlock__multi_attempt *m, uint32_t lagging,
                             const dlock__result *res, dlock_lock **out, char *errbuf)
{
    uint32_t ones = 0;
    dlock__grant g = {m->names[0], m->token, m->fences[0], m->ttl_ms, m->t0,
                      m->t0 + (int64_t)m->ttl_ms - dlock__drift_ms(c, m->ttl_ms),
                      m->ok_mask | m->maybe_mask};

    dlock__count_int(res, c->n, 1, &ones);
    m->synced |= ones & lagging;
    if (dlock__popcount(m->synced) < c->quorum) {
        char why[DLOCK_ERRSTR_LEN];

        (void)dlock__unavailable(c, res, m->ok_mask, m->synced, why);
        dlock__errf(errbuf,
                    "%zu resources (\"%s\", ...) acquired on %zu/%zu nodes, but their fence "
                    "counters were raised on only %zu of them (quorum %zu): %s",
                    m->n, m->names[0], dlock__popcount(m->ok_mask), c->n,
                    dlock__popcount(m->synced), c->quorum, why);
        return DLOCK_ERR_FENCE_SYNC;
    }
    return multi_grant(c, m->names, m->n, m->fences, &g, errbuf, out);
}

/* Undo a failed attempt where the set may have landed (acquire.c, the
 * distlock page's step 5), as a release: a waiter that listed itself on
 * one of our keys meanwhile is handed it, not left to its TTL. */
uint32_t dlock__multi_undo_mask(const dlock__multi_attempt *m, dlock_err rc)
{
    return rc != DLOCK_OK ? m->ok_mask | m->maybe_mask : 0;
}

/* One attempt, the blocking way; client mutex held. mk: the keys of
 * names. errbuf gets the detail on failure. */
static dlock_err multi_once(dlock_client *c, const char *const *names, size_t n, uint32_t ttl_ms,
                            dlock__multi_keys *mk, dlock_lock **out, char *errbuf)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__multi_attempt m;
    uint32_t lagging = 0, undo;
    dlock_err rc;

    memset(res, 0, sizeof(res));
    rc = dlock__multi_prepare(c, &m, names, n, ttl_ms, mk, errbuf);
    if (rc != DLOCK_OK)
        return rc;
    dlock__script_round(c, dlock__all_nodes(c), 0, DLOCK__SCRIPT_MULTI_ACQUIRE, mk->keys,
                        (int)(2 * n), m.args, 2, res, dlock__multi_decided, &m.dq);
    rc = dlock__multi_decide(c, &m, res, &lagging, errbuf);
    if (rc == DLOCK_OK) {
        if (lagging != 0)
            dlock__script_round(c, lagging, 0, DLOCK__SCRIPT_MULTI_FENCE_SYNC, mk->keys + n,
                                (int)n, m.sync_args, (int)n, res, NULL, NULL);
        rc = dlock__multi_grant(c, &m, lagging, res, out, errbuf);
    }
    undo = dlock__multi_undo_mask(&m, rc);
    if (undo != 0)
        dlock__script_send_only(c, undo, DLOCK__SCRIPT_MULTI_RELEASE, mk->keys, (int)(3 * n),
                                mk->args, (int)(3 + n));
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

int dlock__names_check(dlock_client *c, const char *op, const char *const *names, size_t n,
                       uint32_t ttl_ms)
{
    if (names == NULL || n == 0 || n > DLOCK_MAX_MULTI) {
        if (names == NULL || n == 0)
            dlock__errf(c->errstr, "%s: %s", op, names == NULL ? "resources is NULL" : "n is 0");
        else
            dlock__errf(c->errstr, "%s: n is %zu, larger than DLOCK_MAX_MULTI (%d)", op, n,
                        DLOCK_MAX_MULTI);
        return -1;
    }
    if (dlock__ttl_check(ttl_ms, op, c->errstr) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || names[i][0] == '\0') {
            dlock__errf(c->errstr, "%s: resources[%zu] is NULL or empty", op, i);
            return -1;
        }
        if (c->prefix_len + strlen(names[i]) > DLOCK_MAX_KEY_LEN) {
            dlock__errf(c->errstr,
                        "%s: key prefix + resources[%zu] is %zu bytes, longer than %d",
                        op, i, c->prefix_len + strlen(names[i]), DLOCK_MAX_KEY_LEN);
            return -1;
        }
        /* A name twice would have the script SET its key twice and INCR
         * its fence twice, handing out two fences for one resource. The
         * caller's list is wrong; say so rather than guess what was meant.
         * n <= 64 keeps the quadratic scan trivial. */
        for (size_t j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0) {
                dlock__errf(c->errstr, "%s: resources[%zu] and resources[%zu] are both \"%s\"",
                            op, j, i, names[i]);
                return -1;
            }
        }
    }
    return 0;
}

dlock_err dlock_acquire_multi(dlock_client *c, const char *const *resources, size_t n,
                              uint32_t ttl_ms, int64_t deadline_ms, dlock_lock **out)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__multi_keys *mk = NULL;
    const dlock_lock *mine;
    const char *which = NULL;
    unsigned attempt = 0;
    int64_t outer;

    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "acquire_multi") != 0)
        return DLOCK_ERR_ARG;
    if (out == NULL) {
        dlock__errf(c->errstr, "acquire_multi: out is NULL");
        goto out;
    }
    if (dlock__names_check(c, "acquire_multi", resources, n, ttl_ms) != 0 ||
        dlock__deadline_check(deadline_ms, "dlock_acquire_multi", c->errstr) != 0)
        goto out;
    /* Not reentrant (acquire.c): a name this thread holds already. */
    if ((mine = dlock__held_by_caller(c, resources, n, &which)) != NULL) {
        dlock__errf(c->errstr, "acquire_multi: this thread already holds \"%s\" through this "
                    "client (fence %llu); libdlock locks are not reentrant: release it first",
                    which, (unsigned long long)mine->fence);
        goto out;
    }
    /* The names' lengths were checked above: NULL is out of memory. */
    mk = dlock__multi_keys_new(c, resources, n, NULL);
    if (mk == NULL) {
        dlock__errf(c->errstr, "acquire_multi: out of memory for the keys");
        rc = DLOCK_ERR_NOMEM;
        goto out;
    }
    /* Retry with backoff only, never the wake queue: dlock.h says why. */
    outer = dlock__call_begin(deadline_ms);
    for (;;) {
        int64_t now;

        rc = multi_once(c, resources, n, ttl_ms, mk, out, c->errstr);
        dlock__acquire_count_attempt(c, attempt, rc);
        now = dlock_now_ms();
        if (now >= deadline_ms || !dlock__should_retry(c, rc))
            break;
        dlock__backoff_sleep(c, attempt, now, deadline_ms);
        attempt++;
    }
    dlock__call_end(outer);
    if (rc == DLOCK_OK)
        dlock__held_add(c, *out);
    dlock__acquire_count_call(c, rc);
out:
    free(mk);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock_acquire_multi_for(dlock_client *c, const char *const *resources, size_t n,
                                  uint32_t ttl_ms, int64_t wait_ms, dlock_lock **out)
{
    return dlock_acquire_multi(c, resources, n, ttl_ms, dlock__deadline_after(wait_ms), out);
}
