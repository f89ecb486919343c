/* ping_nodes.c - dlock_ping_nodes: PING every node and say which answered,
 * for health reports that name the nodes down; dlock_ping: how many. */
#include "dlock_internal.h"

#include <string.h>

dlock_err dlock_ping_nodes(dlock_client *c, uint32_t *up_mask)
{
    static const char *const argv[1] = {"PING"};
    static const size_t argvlen[1] = {4};
    dlock__result res[DLOCK_MAX_NODES];
    dlock_err rc;
    uint32_t up = 0;

    if (up_mask != NULL)
        *up_mask = 0;
    if (c == NULL)
        return DLOCK_ERR_ARG;
    memset(res, 0, sizeof(res));
    if (dlock__enter(c, "ping") != 0)
        return DLOCK_ERR_ARG;
    dlock__round(c, dlock__all_nodes(c), 0, 1, (const char **)argv, argvlen, res, NULL, NULL);
    for (size_t i = 0; i < c->n; i++) {
        if (res[i].status == DLOCK__R_REPLY && res[i].reply->type == REDIS_REPLY_STATUS)
            up |= 1u << i;
    }
    if (up_mask != NULL)
        *up_mask = up;
    if (dlock__popcount(up) >= c->quorum) {
        rc = DLOCK_OK;
    } else {
        rc = dlock__unavailable(c, res, dlock__all_nodes(c), up, c->errstr);
        c->stats.errors++;
    }
    dlock__results_clear(res, DLOCK_MAX_NODES);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock_ping(dlock_client *c, size_t *up_out)
{
    uint32_t up = 0;
    /* The same round, counted. */
    dlock_err rc = dlock_ping_nodes(c, &up);

    if (up_out != NULL)
        *up_out = dlock__popcount(up);
    return rc;
}
