/* acquire.c - one acquisition attempt (the Redlock algorithm, N = 1 being
 * the single-instance lock: prepare, one round, tally, grant or undo) and
 * dlock_acquire / dlock_acquire_for / dlock_try_acquire with the retry
 * loop around it. The keys are named in keys.c; several resources at once
 * are multi.c. */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Acquire replies: integer > 0 = set, and the value is that node's fence;
 * integer 0 = someone else holds the key. */
static int acquired(const dlock__result *r)
{
    return r->status == DLOCK__R_REPLY && r->reply->type == REDIS_REPLY_INTEGER &&
           r->reply->integer > 0;
}

static int refused(const dlock__result *r)
{
    return r->status == DLOCK__R_REPLY &&
           ((r->reply->type == REDIS_REPLY_INTEGER && r->reply->integer == 0) ||
            r->reply->type == REDIS_REPLY_NIL);
}

int dlock__attempt_decided(const dlock__result *res, size_t n, void *arg)
{
    size_t ok = 0;

    for (size_t i = 0; i < n; i++)
        ok += (size_t)acquired(&res[i]);
    return ok >= *(const size_t *)arg;
}

dlock_err dlock__attempt_prepare(dlock_client *c, dlock__attempt *a, const char *resource,
                                 uint32_t ttl_ms, char *errbuf)
{
    memset(a, 0, sizeof(*a));
    a->resource = resource;
    a->ttl_ms = ttl_ms;
    if (dlock__lock_key(c, a->resource, a->key, sizeof(a->key)) != 0 ||
        dlock__fence_key(c, a->resource, a->fkey, sizeof(a->fkey)) != 0) {
        dlock__errf(errbuf, "key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    snprintf(a->ttl_s, sizeof(a->ttl_s), "%u", a->ttl_ms);
    a->keys[0] = a->key;
    a->keys[1] = a->fkey;
    /* A fresh token per acquisition, not per client: a token reused across
     * acquisitions would let an old, expired acquisition of ours release or
     * extend a newer one. */
    if (dlock__token_new(a->token) != 0) {
        dlock__errf(errbuf, "no randomness for the token");
        return DLOCK_ERR_NOMEM;
    }
    a->args[0] = a->token;
    a->args[1] = a->ttl_s;
    a->sync_args[0] = a->fence_s;
    /* Redlock step 1: the time before the first SET is sent; every key is
     * set at or after t0, so t0 + TTL bounds the earliest expiry. */
    a->t0 = dlock_now_ms();
    return DLOCK_OK;
}

/* Sorts the nodes by their answer to acquire.lua. */
static void attempt_tally(const dlock_client *c, dlock__attempt *a, const dlock__result *res)
{
    for (size_t i = 0; i < c->n; i++) {
        if (acquired(&res[i])) {
            a->ok_mask |= 1u << i;
            if ((uint64_t)res[i].reply->integer > a->fence)
                a->fence = (uint64_t)res[i].reply->integer;
        } else if (refused(&res[i])) {
            a->answered |= 1u << i;
        } else if (res[i].status != DLOCK__R_DOWN && res[i].status != DLOCK__R_AUTH) {
            /* Sent but the answer is unknown (timeout, broken connection,
             * still pending) or an error that may have come after the SET
             * (INCR on a corrupted fence key): the key may be ours there. */
            a->maybe_mask |= 1u << i;
        }
    }
    a->answered |= a->ok_mask;
}

/* Fences must grow across acquisitions, and each node keeps its own
 * counter. Two quorums share a node. But the maximum of one quorum can come
 * from a node the next quorum does not include. Counters A=11 B=6 C=6
 * after an acquisition on {A,B} (fence 11) let the next one on {B,C} get
 * fence 7. So when the counters of our quorum disagree, the lower ones are
 * raised to our fence before the lock is handed out. Then every node of our
 * quorum holds >= fence. The next quorum shares at least one of them, so it
 * gets a larger fence. Counters agree in steady state, so this extra round
 * only happens after a node missed acquisitions (down, partitioned). */
static uint32_t fence_lagging(const dlock_client *c, dlock__attempt *a, const dlock__result *res)
{
    uint32_t lagging = 0;

    for (size_t i = 0; i < c->n; i++) {
        if (!(a->ok_mask & (1u << i)))
            continue;
        if ((uint64_t)res[i].reply->integer == a->fence)
            a->synced |= 1u << i;
        else
            lagging |= 1u << i;
    }
    snprintf(a->fence_s, sizeof(a->fence_s), "%llu", (unsigned long long)a->fence);
    return lagging;
}

dlock_err dlock__attempt_verdict(dlock_client *c, uint32_t ok_mask, uint32_t answered,
                                 const dlock__result *res, char *errbuf)
{
    if (dlock__popcount(ok_mask) >= c->quorum)
        return DLOCK_OK;
    if (dlock__popcount(answered) >= c->quorum)
        return DLOCK_ERR_TAKEN;
    return dlock__unavailable(c, res, dlock__all_nodes(c), answered, errbuf);
}

dlock_err dlock__attempt_decide(dlock_client *c, dlock__attempt *a, const dlock__result *res,
                                uint32_t *lagging, char *errbuf)
{
    dlock_err rc;

    *lagging = 0;
    attempt_tally(c, a, res);
    rc = dlock__attempt_verdict(c, a->ok_mask, a->answered, res, errbuf);
    if (rc == DLOCK_OK)
        *lagging = fence_lagging(c, a, res);
    else if (rc == DLOCK_ERR_TAKEN)
        dlock__errf(errbuf,
                    "\"%s\" is held by another owner (acquired on %zu/%zu nodes, quorum %zu)",
                    a->resource, dlock__popcount(a->ok_mask), c->n, c->quorum);
    return rc;
}

/* A quorum set the key: the fences synced, check the validity left, make
 * the handle. */
dlock_err dlock__attempt_grant(dlock_client *c, dlock__attempt *a, uint32_t lagging,
                               const dlock__result *res, dlock_lock **out, char *errbuf)
{
    uint32_t ones = 0;

    dlock__count_int(res, c->n, 1, &ones);
    a->synced |= ones & lagging;
    /* Redlock steps 3-4: the lock is ours only if a majority holds it AND
     * time is left: validity = TTL - elapsed - drift. Keys set early in the
     * round expire first; elapsed covers the whole round. */
    dlock__grant g = {a->resource, a->token, a->fence, a->ttl_ms, a->t0,
                      a->t0 + (int64_t)a->ttl_ms - dlock__drift_ms(c, a->ttl_ms),
                      a->ok_mask | a->maybe_mask};

    if (dlock__popcount(a->synced) < c->quorum) {
        /* A quorum granted the lock, so this is not NO_QUORUM. The counters
         * of the lagging nodes could not be raised (the sync round timed
         * out there or was refused). A fence that a later quorum might
         * undercut is no fence. Its own code lets an operator look at the
         * right thing. */
        char why[DLOCK_ERRSTR_LEN];
        (void)dlock__unavailable(c, res, a->ok_mask, a->synced, why);
        dlock__errf(errbuf,
                    "\"%s\" acquired on %zu/%zu nodes, but the fence counter reached %llu "
                    "on only %zu of them (quorum %zu): %s",
                    a->resource, dlock__popcount(a->ok_mask), c->n, (unsigned long long)a->fence,
                    dlock__popcount(a->synced), c->quorum, why);
        return DLOCK_ERR_FENCE_SYNC;
    }
    /* dlock__lock_grant checks the validity left (the elapsed time covers
     * the whole round and the sync). */
    return dlock__lock_grant(c, &g, errbuf, out);
}

/* Redlock step 5: undo a failed acquisition at once, so others need not
 * wait for our keys to expire. Only where the SET may have landed: a node
 * that answered "not set" certainly holds no key of ours (the token is
 * new), and skipping it saves work. Nobody waits for these replies - the
 * attempt has already failed - so the clean-up costs no round-trip time;
 * the next round discards the answers. pass.lua, as the multi and batch
 * undos: a waiter that queued behind our late key there gets it now
 * instead of after our TTL (token-checked: a key another client took
 * meanwhile stays theirs). */
uint32_t dlock__attempt_undo_mask(dlock_client *c, dlock__attempt *a, dlock_err rc)
{
    if (rc != DLOCK_OK && (a->ok_mask | a->maybe_mask) != 0) {
        if (dlock__pass_prepare(c, a->resource, a->token, &a->undo) == 0)
            return a->ok_mask | a->maybe_mask;
    }
    return 0;
}

/* One attempt, the blocking way; client mutex held. errbuf gets the detail
 * on failure. */
static dlock_err acquire_once(dlock_client *c, const char *resource, uint32_t ttl_ms,
                              dlock_lock **out, char *errbuf)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__attempt a;
    uint32_t lagging = 0, undo;
    dlock_err rc;

    memset(res, 0, sizeof(res));
    rc = dlock__attempt_prepare(c, &a, resource, ttl_ms, errbuf);
    if (rc != DLOCK_OK)
        return rc;
    dlock__script_round(c, dlock__all_nodes(c), 0, DLOCK__SCRIPT_ACQUIRE, a.keys, 2, a.args, 2,
                        res, dlock__attempt_decided, &c->quorum);
    rc = dlock__attempt_decide(c, &a, res, &lagging, errbuf);
    if (rc == DLOCK_OK) {
        if (lagging != 0)
            dlock__script_round(c, lagging, 0, DLOCK__SCRIPT_FENCE_SYNC,
                                (const char *const *)&a.keys[1], 1, a.sync_args, 1, res, NULL,
                                NULL);
        rc = dlock__attempt_grant(c, &a, lagging, res, out, errbuf);
    }
    undo = dlock__attempt_undo_mask(c, &a, rc);
    if (undo != 0)
        dlock__script_send_only(c, undo, DLOCK__SCRIPT_PASS, a.undo.keys, 3, a.undo.args, 4);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

/* Client mutex held. 0, or -1 with why in c->errstr: nothing is sent. */
int dlock__acquire_check(dlock_client *c, const char *resource, uint32_t ttl_ms,
                         int64_t deadline_ms)
{
    if (resource == NULL || resource[0] == '\0')
        dlock__errf(c->errstr, "acquire: resource is NULL or empty");
    else if (dlock__ttl_check(ttl_ms, "acquire", c->errstr) != 0)
        return -1;
    else if (c->prefix_len + strlen(resource) > DLOCK_MAX_KEY_LEN)
        dlock__errf(c->errstr, "acquire: key prefix + resource is %zu bytes, longer than %d",
                    c->prefix_len + strlen(resource), DLOCK_MAX_KEY_LEN);
    else
        return dlock__deadline_check(deadline_ms, "dlock_acquire", c->errstr);
    return -1;
}

void dlock__count_try(dlock_client *c, unsigned attempt)
{
    c->stats.attempts++;
    if (attempt > 0)
        c->stats.retries++;
}

void dlock__acquire_count_attempt(dlock_client *c, unsigned attempt, dlock_err rc)
{
    dlock__count_try(c, attempt);
    if (rc == DLOCK_OK)
        c->stats.acquires++;
    else if (rc == DLOCK_ERR_TAKEN)
        c->stats.taken++;
}

void dlock__acquire_count_call(dlock_client *c, dlock_err rc)
{
    if (rc != DLOCK_OK && dlock_err_is_unavailable(rc))
        c->stats.errors++;
}

/* dlock_acquire's work, arguments checked; client mutex held throughout
 * (the waits release it themselves). */
static dlock_err acquire_locked(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                int64_t deadline_ms, dlock_lock **out)
{
    dlock_err rc;
    unsigned attempt = 0;

    /* A sentinel node without a master (sentinel.c): asked before the
     * first attempt, with the mutex released. */
    dlock__sentinel_await(c, INT64_MAX);
    /* One node, waking, with time to wait: the FIFO queue with direct
     * hand-off (queue.c). A try (no time to wait) is one plain attempt
     * below and never lists itself as a waiter. */
    if (c->n == 1 && c->wake_on_release && deadline_ms > dlock_now_ms())
        return dlock__acquire_queued(c, resource, ttl_ms, deadline_ms, out);
    /* Redlock, waking, with time to wait: the same queue on every node,
     * the lock held once a quorum handed it over (rqueue.c). */
    if (c->n > 1 && c->wake_on_release && deadline_ms > dlock_now_ms())
        return dlock__acquire_rqueued(c, resource, ttl_ms, deadline_ms, out);
    for (;;) {
        int64_t now;

        rc = acquire_once(c, resource, ttl_ms, out, c->errstr);
        dlock__acquire_count_attempt(c, attempt, rc);
        now = dlock_now_ms();
        if (!dlock__should_retry(c, rc) || now >= deadline_ms)
            return rc;
        dlock__backoff_sleep(c, attempt, now, deadline_ms);
        attempt++;
    }
}

dlock_err dlock_acquire(dlock_client *c, const char *resource, uint32_t ttl_ms,
                        int64_t deadline_ms, dlock_lock **out)
{
    const dlock_lock *mine;
    const char *which = NULL;
    dlock_err rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "acquire") != 0)
        return DLOCK_ERR_ARG;
    if (out == NULL)
        dlock__errf(c->errstr, "acquire: out is NULL");
    if (out == NULL || dlock__acquire_check(c, resource, ttl_ms, deadline_ms) != 0) {
        pthread_mutex_unlock(&c->mu);
        return DLOCK_ERR_ARG;
    }
    /* Not reentrant: a second acquire of a lock this thread holds would
     * wait for itself until its deadline, then say "held by another". */
    if ((mine = dlock__held_by_caller(c, &resource, 1, &which)) != NULL) {
        dlock__errf(c->errstr, "acquire \"%s\": this thread already holds it through this client "
                    "(fence %llu, %lld ms left); libdlock locks are not reentrant: use that "
                    "handle, or release it first", which, (unsigned long long)mine->fence,
                    (long long)(atomic_load(&mine->valid_until_ms) - dlock_now_ms()));
        pthread_mutex_unlock(&c->mu);
        return DLOCK_ERR_ARG;
    }
    {
        int64_t outer = dlock__call_begin(deadline_ms);

        rc = acquire_locked(c, resource, ttl_ms, deadline_ms, out);
        dlock__call_end(outer);
    }
    if (rc == DLOCK_OK)
        dlock__held_add(c, *out);
    dlock__acquire_count_call(c, rc);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock_try_acquire(dlock_client *c, const char *resource, uint32_t ttl_ms,
                            dlock_lock **out)
{
    return dlock_acquire(c, resource, ttl_ms, INT64_MIN, out);
}

dlock_err dlock_acquire_for(dlock_client *c, const char *resource, uint32_t ttl_ms,
                            int64_t wait_ms, dlock_lock **out)
{
    return dlock_acquire(c, resource, ttl_ms, dlock__deadline_after(wait_ms), out);
}
