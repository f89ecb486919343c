/* fence_raise.c - dlock_fence_raise: lift a resource's fence counters to at
 * least a value, on a quorum, never lowering any.
 *
 * Why: the counters live in Redis. A node that restarts without its data
 * (no AOF, FLUSHALL) starts them at 0 again. The storage behind the lock
 * still remembers the highest fence it accepted, so every new holder is
 * then refused as stale until the counter has climbed back. The storage
 * knows that value, so the caller hands it here and the next acquisition
 * draws a fence above it. Raising is always safe: fences must only grow,
 * and a counter already higher is left alone. The counter's key is
 * dlock__fence_key's (keys.c: "<prefix>fence:<resource>"). */
#include "dlock_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

dlock_err dlock_fence_raise(dlock_client *c, const char *resource, uint64_t at_least)
{
    dlock__result res[DLOCK_MAX_NODES];
    char fkey[DLOCK__KEY_BUF + 8], value[24];
    const char *keys[1] = {fkey};
    const char *args[1] = {value};
    uint32_t ones = 0;
    dlock_err rc;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "fence_raise") != 0)
        return DLOCK_ERR_ARG;
    if (resource == NULL || resource[0] == '\0' || c->prefix_len + strlen(resource) > DLOCK_MAX_KEY_LEN ||
        dlock__fence_key(c, resource, fkey, sizeof(fkey)) != 0) {
        dlock__errf(c->errstr, "fence raise: resource is NULL, empty or longer than %d bytes with the prefix",
                    DLOCK_MAX_KEY_LEN);
        pthread_mutex_unlock(&c->mu);
        return DLOCK_ERR_ARG;
    }
    /* Lua numbers are doubles: past 2^53 the script's comparison would round. */
    if (at_least > (UINT64_C(1) << 53)) {
        dlock__errf(c->errstr, "fence raise: %" PRIu64 " is past 2^53, which the script cannot compare exactly",
                    at_least);
        pthread_mutex_unlock(&c->mu);
        return DLOCK_ERR_ARG;
    }
    snprintf(value, sizeof(value), "%" PRIu64, at_least);
    memset(res, 0, sizeof(res));
    /* The fence-sync script: SET to ARGV[1] only if the counter is lower. */
    dlock__script_round(c, dlock__all_nodes(c), 0, DLOCK__SCRIPT_FENCE_SYNC, keys, 1, args, 1, res, NULL, NULL);
    dlock__count_int(res, c->n, 1, &ones);
    /* A quorum: every later quorum shares a node with it, so the next
     * acquisition's fence (the maximum over its quorum, plus one) is above
     * at_least. Nodes that missed it are lifted by the acquisition's own
     * fence sync. */
    if (dlock__popcount(ones) >= c->quorum) {
        rc = DLOCK_OK;
    } else {
        rc = dlock__unavailable(c, res, dlock__all_nodes(c), ones, c->errstr);
        c->stats.errors++;
    }
    dlock__results_clear(res, DLOCK_MAX_NODES);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
