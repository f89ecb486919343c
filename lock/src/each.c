/* each.c - several INDEPENDENT resources in one round per node:
 * dlock_try_acquire_each (acquire_each.lua: acquire.lua's step for every
 * key on its own, each with its own token and fence) and
 * dlock_release_each (release_each.lua: pass.lua's step for every lock).
 *
 * Why not dlock_acquire_multi: a multi lock is all or nothing, so one busy
 * resource refuses the whole set. A caller with work on many resources
 * (the coupon-server's claim worker, one coupon each) wants every free one
 * now and the busy ones later. It needs one round for all of them instead
 * of one per resource: a holder carrying one or two claims cannot afford
 * to pay that round n times. Each resource is decided on its own, exactly
 * as acquire.c decides one: quorum, fence sync, validity, undo. */
#include "dlock_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One resource of an acquire_each round, as the nodes answered it. */
typedef struct each_res {
    char token[DLOCK_TOKEN_LEN];
    uint32_t ok_mask;  /* nodes that set the key (and INCRed the fence) */
    uint32_t refused;  /* nodes that answered "held" */
    uint64_t fence;    /* the largest fence the ok nodes answered */
    int undo;          /* not handed out: release it where it may have landed */
} each_res;

/* A node's answer to acquire_each.lua / release_each.lua: an array of n
 * integers >= 0. Anything else (an error reply, no reply) says nothing of
 * any key. */
static int each_reply(const dlock__result *r, size_t n)
{
    const redisReply *x = r->reply;

    if (r->status != DLOCK__R_REPLY || x->type != REDIS_REPLY_ARRAY || x->elements != n)
        return 0;
    for (size_t j = 0; j < n; j++)
        if (x->element[j]->type != REDIS_REPLY_INTEGER || x->element[j]->integer < 0)
            return 0;
    return 1;
}

static long long each_at(const dlock__result *r, size_t j)
{
    return r->reply->element[j]->integer;
}

/* Stop rule of both rounds: every key is decided, one way or the other -
 * a quorum answered yes (> 0), or so many answered 0 that the silent
 * nodes cannot make a quorum of yes any more. Waiting longer would only
 * wait out a paused minority. */
typedef struct decide_arg {
    size_t quorum;
    size_t n;
} decide_arg;

static int each_decided(const dlock__result *res, size_t nodes, void *arg)
{
    const decide_arg *d = arg;

    for (size_t j = 0; j < d->n; j++) {
        size_t yes = 0, no = 0;

        for (size_t i = 0; i < nodes; i++) {
            if (!each_reply(&res[i], d->n))
                continue;
            if (each_at(&res[i], j) > 0)
                yes++;
            else
                no++;
        }
        if (yes < d->quorum && nodes - no >= d->quorum)
            return 0;
    }
    return 1;
}

/* The keys of names[0..n) (lengths already checked), or NULL: out of
 * memory, said in the errstr and in every rc_out. */
static dlock__multi_keys *each_keys(dlock_client *c, const char *op, const char *const *names,
                                    size_t n, dlock_err *rc_out)
{
    dlock__multi_keys *mk = dlock__multi_keys_new(c, names, n, NULL);

    if (mk == NULL) {
        dlock__errf(c->errstr, "%s: out of memory for the keys", op);
        for (size_t j = 0; j < n; j++)
            rc_out[j] = DLOCK_ERR_NOMEM;
    }
    return mk;
}

/* The keys and arguments of release_each.lua for the resources of idx[0..k)
 * of mk (their lock keys, fence keys, waiters sets) with tokens[idx[j]]:
 * into keys[3k] and args[1 + 2k]. */
static void release_each_argv(const dlock__multi_keys *mk, const size_t *idx, size_t k,
                              const char *const *tokens, const char **keys, const char **args)
{
    size_t n = mk->n;

    args[0] = mk->list_prefix;
    for (size_t j = 0; j < k; j++) {
        keys[j] = mk->keys[idx[j]];
        keys[k + j] = mk->keys[n + idx[j]];
        keys[2 * k + j] = mk->keys[2 * n + idx[j]];
        args[1 + j] = tokens[idx[j]];
        args[1 + k + j] = mk->args[3 + idx[j]];
    }
}

/* The fence sync of acquire.c (why: see fence_lagging there), for every
 * granted resource at once. The nodes of a resource's quorum whose counter
 * is below its fence are raised to it, in ONE round of
 * multi_fence_sync.lua over the resources that need it. That round goes to
 * every node that lags on any of them. Raising a counter on a node that
 * did not lag for that resource is harmless: counters only ever go up, and
 * a higher counter only makes later fences larger. synced[j] gets the
 * nodes known to hold >= fence for resource j. */
static void each_fence_sync(dlock_client *c, const dlock__multi_keys *mk, each_res *er,
                            const size_t *want, size_t k, dlock__result *res, uint32_t *synced)
{
    uint32_t lagging[DLOCK_MAX_MULTI], any = 0, ones = 0;
    const char *keys[DLOCK_MAX_MULTI], *args[DLOCK_MAX_MULTI];
    char fence_s[DLOCK_MAX_MULTI][24];
    size_t m = 0;

    for (size_t w = 0; w < k; w++) {
        size_t j = want[w];

        lagging[w] = 0;
        for (size_t i = 0; i < c->n; i++)
            if ((er[j].ok_mask & (1u << i)) && (uint64_t)each_at(&res[i], j) != er[j].fence)
                lagging[w] |= 1u << i;
        synced[j] = er[j].ok_mask & ~lagging[w];
        if (lagging[w] == 0)
            continue;
        any |= lagging[w];
        snprintf(fence_s[m], sizeof(fence_s[m]), "%" PRIu64, er[j].fence);
        keys[m] = mk->keys[mk->n + j];
        args[m] = fence_s[m];
        m++;
    }
    if (any == 0)
        return;
    /* res is the acquire round's: its fences were read above. */
    dlock__script_round(c, any, 0, DLOCK__SCRIPT_MULTI_FENCE_SYNC, keys, (int)m, args, (int)m,
                        res, NULL, NULL);
    dlock__count_int(res, c->n, 1, &ones);
    for (size_t w = 0; w < k; w++)
        synced[want[w]] |= ones & lagging[w];
}

/* The round and everything after it; client mutex held, arguments checked.
 * Returns the call's code (DLOCK_OK when a quorum answered the round). */
static dlock_err each_once(dlock_client *c, const char *const *names, size_t n, uint32_t ttl_ms,
                           const dlock__multi_keys *mk, dlock_lock **locks_out,
                           dlock_err *rc_out)
{
    dlock__result res[DLOCK_MAX_NODES];
    each_res er[DLOCK_MAX_MULTI];
    const char *tokens[DLOCK_MAX_MULTI];
    const char *args[1 + DLOCK_MAX_MULTI];
    const char *rkeys[3 * DLOCK_MAX_MULTI], *rargs[1 + 2 * DLOCK_MAX_MULTI];
    size_t want[DLOCK_MAX_MULTI], undo[DLOCK_MAX_MULTI], k = 0, u = 0, granted = 0, taken = 0;
    uint32_t synced[DLOCK_MAX_MULTI];
    uint32_t answered = 0, maybe = 0, undo_mask = 0, all = dlock__all_nodes(c);
    /* why: the first refusal's detail, for the errstr; later ones go to
     * scratch. */
    char ttl_s[16], why[DLOCK_ERRSTR_LEN] = "", scratch[DLOCK_ERRSTR_LEN];
    decide_arg d = {c->quorum, n};
    dlock_err rc = DLOCK_OK;
    int64_t t0;

    memset(res, 0, sizeof(res));
    memset(er, 0, sizeof(er));
    snprintf(ttl_s, sizeof(ttl_s), "%" PRIu32, ttl_ms);
    args[0] = ttl_s;
    for (size_t j = 0; j < n; j++) {
        /* A fresh token per resource and acquisition (acquire.c says why);
         * its own per resource, so each handle releases only its key. */
        if (dlock__token_new(er[j].token) != 0) {
            dlock__errf(c->errstr, "try_acquire_each: no randomness for the tokens");
            for (size_t i = 0; i < n; i++)
                rc_out[i] = DLOCK_ERR_NOMEM;
            return DLOCK_ERR_NOMEM;
        }
        tokens[j] = er[j].token;
        args[1 + j] = er[j].token;
    }
    /* Redlock step 1, as acquire.c: every key is set at or after t0. */
    t0 = dlock_now_ms();
    dlock__script_round(c, all, 0, DLOCK__SCRIPT_ACQUIRE_EACH, mk->keys, (int)(2 * n), args,
                        (int)(1 + n), res, each_decided, &d);
    for (size_t i = 0; i < c->n; i++) {
        if (each_reply(&res[i], n)) {
            answered |= 1u << i;
            for (size_t j = 0; j < n; j++) {
                long long f = each_at(&res[i], j);

                if (f == 0) {
                    er[j].refused |= 1u << i;
                    continue;
                }
                er[j].ok_mask |= 1u << i;
                if ((uint64_t)f > er[j].fence)
                    er[j].fence = (uint64_t)f;
            }
        } else if (res[i].status != DLOCK__R_DOWN && res[i].status != DLOCK__R_AUTH) {
            /* Sent, answer unknown or an error after some SETs (acquire.c,
             * the same case): any key may be ours there. */
            maybe |= 1u << i;
        }
    }
    if (dlock__popcount(answered) < c->quorum) {
        /* Too few nodes answered for any resource to be decided: the whole
         * call is unavailable, and every key that landed is undone. */
        rc = dlock__unavailable(c, res, all, answered, c->errstr);
        for (size_t j = 0; j < n; j++) {
            rc_out[j] = rc;
            er[j].undo = 1;
        }
    } else {
        for (size_t j = 0; j < n; j++) {
            if (dlock__popcount(er[j].ok_mask) >= c->quorum) {
                want[k++] = j;
                continue;
            }
            /* A quorum answered, so a resource short of one is held
             * elsewhere; a minority that did grant it is undone below. */
            rc_out[j] = DLOCK_ERR_TAKEN;
            er[j].undo = 1;
            taken++;
            if (why[0] == '\0')
                dlock__errf(why, "\"%s\" is held by another owner (acquired on %zu/%zu nodes, "
                            "quorum %zu)", names[j], dlock__popcount(er[j].ok_mask), c->n,
                            c->quorum);
        }
        if (k > 0)
            each_fence_sync(c, mk, er, want, k, res, synced);
        for (size_t w = 0; w < k; w++) {
            size_t j = want[w];
            /* Redlock steps 3-4 per resource (acquire.c): validity = TTL -
             * elapsed - drift, elapsed covering the round and the sync;
             * dlock__lock_grant refuses a handle with none left. */
            dlock__grant g = {names[j], er[j].token, er[j].fence, ttl_ms, t0,
                              t0 + (int64_t)ttl_ms - dlock__drift_ms(c, ttl_ms),
                              er[j].ok_mask | maybe};
            char *eb = why[0] == '\0' ? why : scratch;

            if (dlock__popcount(synced[j]) < c->quorum) {
                /* acquire.c's FENCE_SYNC: a fence a later quorum might
                 * undercut is no fence. */
                char nodes_why[DLOCK_ERRSTR_LEN];

                (void)dlock__unavailable(c, res, er[j].ok_mask, synced[j], nodes_why);
                dlock__errf(eb, "\"%s\" acquired on %zu/%zu nodes, but the fence counter "
                            "reached %" PRIu64 " on only %zu of them (quorum %zu): %s",
                            names[j], dlock__popcount(er[j].ok_mask), c->n, er[j].fence,
                            dlock__popcount(synced[j]), c->quorum, nodes_why);
                rc_out[j] = DLOCK_ERR_FENCE_SYNC;
            } else {
                rc_out[j] = dlock__lock_grant(c, &g, eb, &locks_out[j]);
            }
            if (rc_out[j] != DLOCK_OK) {
                er[j].undo = 1;
                continue;
            }
            dlock__held_add(c, locks_out[j]);
            granted++;
        }
        if (granted < n)
            dlock__errf(c->errstr, "try_acquire_each: %zu of %zu resources granted; first "
                        "refusal: %s", granted, n, why);
    }
    c->stats.acquires += granted;
    c->stats.taken += taken;
    /* Redlock step 5 per resource, at once and in one go. Every key not
     * handed out is released where it may have landed (a minority grant,
     * a failed sync or validity), token-checked. It goes through
     * hand_over, so a waiter that listed itself on it meanwhile is handed
     * it. Nobody waits for the answers (acquire.c says why). */
    for (size_t j = 0; j < n; j++) {
        if (!er[j].undo || (er[j].ok_mask | maybe) == 0)
            continue;
        undo[u++] = j;
        undo_mask |= er[j].ok_mask | maybe;
    }
    if (u > 0) {
        release_each_argv(mk, undo, u, tokens, rkeys, rargs);
        dlock__script_send_only(c, undo_mask, DLOCK__SCRIPT_RELEASE_EACH, rkeys, (int)(3 * u),
                                rargs, (int)(1 + 2 * u));
    }
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

dlock_err dlock_try_acquire_each(dlock_client *c, const char *const *resources, size_t n,
                                 uint32_t ttl_ms, dlock_lock **locks_out, dlock_err *rc_out)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__multi_keys *mk = NULL;
    const dlock_lock *mine;
    const char *which = NULL;
    int64_t outer;

    /* Out parameters first, on every path (dlock.h): n is not checked yet,
     * so only as far as DLOCK_MAX_MULTI. */
    for (size_t j = 0; j < n && j < DLOCK_MAX_MULTI; j++) {
        if (locks_out != NULL)
            locks_out[j] = NULL;
        if (rc_out != NULL)
            rc_out[j] = DLOCK_ERR_ARG;
    }
    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "try_acquire_each") != 0)
        return DLOCK_ERR_ARG;
    if (locks_out == NULL || rc_out == NULL) {
        dlock__errf(c->errstr, "try_acquire_each: %s is NULL",
                    locks_out == NULL ? "locks_out" : "rc_out");
        goto out;
    }
    if (dlock__names_check(c, "try_acquire_each", resources, n, ttl_ms) != 0)
        goto out;
    /* Not reentrant (acquire.c): a name this thread holds already. */
    if ((mine = dlock__held_by_caller(c, resources, n, &which)) != NULL) {
        dlock__errf(c->errstr, "try_acquire_each: this thread already holds \"%s\" through "
                    "this client (fence %" PRIu64 "); libdlock locks are not reentrant: "
                    "release it first", which, mine->fence);
        goto out;
    }
    /* The names' lengths were checked above: NULL is out of memory. */
    if ((mk = each_keys(c, "try_acquire_each", resources, n, rc_out)) == NULL) {
        rc = DLOCK_ERR_NOMEM;
        goto out;
    }
    /* A sentinel node without a master: asked first (acquire.c). */
    dlock__sentinel_await(c, INT64_MAX);
    /* A try: the round's bound is now plus one command timeout. */
    outer = dlock__call_begin(INT64_MIN);
    c->stats.attempts++;
    rc = each_once(c, resources, n, ttl_ms, mk, locks_out, rc_out);
    dlock__call_end(outer);
    if (dlock_err_is_unavailable(rc))
        c->stats.errors++;
out:
    free(mk);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock_release_each(dlock_client *c, dlock_lock **locks, size_t n, dlock_err *rc_out)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock__result res[DLOCK_MAX_NODES];
    dlock__multi_keys *mk = NULL;
    const char *names[DLOCK_MAX_MULTI], *tokens[DLOCK_MAX_MULTI];
    const char *keys[3 * DLOCK_MAX_MULTI], *args[1 + 2 * DLOCK_MAX_MULTI];
    size_t idx[DLOCK_MAX_MULTI];
    uint32_t reach = 0, all, unknown;
    decide_arg d = {0, n};

    memset(res, 0, sizeof(res));
    for (size_t j = 0; rc_out != NULL && j < n && j < DLOCK_MAX_MULTI; j++)
        rc_out[j] = DLOCK_ERR_ARG;
    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "release_each") != 0)
        return DLOCK_ERR_ARG;
    if (locks == NULL || rc_out == NULL || n == 0) {
        dlock__errf(c->errstr, "release_each: %s", locks == NULL ? "locks is NULL"
                    : rc_out == NULL ? "rc_out is NULL" : "n is 0");
        goto out;
    }
    if (n > DLOCK_MAX_MULTI) {
        dlock__errf(c->errstr, "release_each: n is %zu, larger than DLOCK_MAX_MULTI (%d)", n,
                    DLOCK_MAX_MULTI);
        goto out;
    }
    /* Every handle is checked before anything is sent or marked: a bad one
     * refuses the call, and the others stay held for a release that works. */
    for (size_t j = 0; j < n; j++) {
        if (dlock__release_ready(c, locks[j], "release_each", c->errstr) != 0)
            goto out;
        if (locks[j]->multi != NULL) {
            /* Its keys share one token: release_each.lua checks one token
             * per key, and dlock_release already does a set in one round. */
            dlock__errf(c->errstr, "release_each: locks[%zu] is a dlock_acquire_multi lock; "
                        "release it with dlock_release", j);
            goto out;
        }
        for (size_t i = 0; i < j; i++) {
            if (locks[i] == locks[j]) {
                dlock__errf(c->errstr, "release_each: locks[%zu] and locks[%zu] are the same "
                            "handle", i, j);
                goto out;
            }
        }
        names[j] = locks[j]->resource;
        tokens[j] = locks[j]->token;
        idx[j] = j;
        reach |= locks[j]->may_hold;
    }
    if ((mk = each_keys(c, "release_each", names, n, rc_out)) == NULL) {
        rc = DLOCK_ERR_NOMEM;
        goto out;
    }
    for (size_t j = 0; j < n; j++)
        dlock__release_mark(c, locks[j]);
    release_each_argv(mk, idx, n, tokens, keys, args);
    all = dlock__all_nodes(c);
    d.quorum = c->quorum;
    /* On every node, reaching those where an acquire may have landed even
     * with their breaker open (release.c says why). */
    dlock__script_round(c, all, reach, DLOCK__SCRIPT_RELEASE_EACH, keys, (int)(3 * n), args,
                        (int)(1 + 2 * n), res, each_decided, &d);
    /* One node: a release not answered may yet meet NOSCRIPT (release.c). */
    unknown = dlock__release_unanswered(c, all, res);
    if (unknown != 0)
        dlock__script_send_only(c, unknown, DLOCK__SCRIPT_RELEASE_EACH, keys, (int)(3 * n), args,
                                (int)(1 + 2 * n));
    {
        uint32_t answered = 0;
        /* The first failed lock's detail is kept for the errstr; the later
         * ones' go to scratch. */
        char why[DLOCK_ERRSTR_LEN] = "", scratch[DLOCK_ERRSTR_LEN];

        for (size_t i = 0; i < c->n; i++)
            if (each_reply(&res[i], n))
                answered |= 1u << i;
        for (size_t j = 0; j < n; j++) {
            uint32_t ones = 0, zeros = 0;

            for (size_t i = 0; i < c->n; i++) {
                if (!(answered & (1u << i)))
                    continue;
                if (each_at(&res[i], j) == 1)
                    ones |= 1u << i;
                else
                    zeros |= 1u << i;
            }
            rc_out[j] = dlock__release_outcome(c, locks[j], ones, zeros, res,
                                               why[0] == '\0' ? why : scratch);
        }
        if (dlock__popcount(answered) < c->quorum) {
            rc = dlock__unavailable(c, res, all, answered, c->errstr);
        } else {
            rc = DLOCK_OK;
            if (why[0] != '\0')
                dlock__errf(c->errstr, "release_each: %s", why);
        }
    }
out:
    free(mk);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
