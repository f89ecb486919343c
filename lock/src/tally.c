/* tally.c - reading a round's answers:
 * - what they add up to: node masks and their counts, the nodes that
 *   answered a given integer, the stop rule "a quorum answered 1";
 * - whether one of them is an error reply;
 * - the code and message of a round too few nodes answered
 *   (dlock__unavailable), and the nodes named in a detail;
 * - freeing them (dlock__results_clear).
 * Nothing here sends or waits: the rounds are round_core.c's and their
 * drivers'. */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>

size_t dlock__popcount(uint32_t mask)
{
    size_t k = 0;

    for (; mask != 0; mask &= mask - 1)
        k++;
    return k;
}

uint32_t dlock__all_nodes(const dlock_client *c)
{
    return c->n >= 32 ? 0xffffffffu : ((1u << c->n) - 1u);
}

void dlock__results_clear(dlock__result *res, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (res[i].reply != NULL)
            freeReplyObject(res[i].reply);
        res[i].reply = NULL;
        res[i].status = DLOCK__R_UNSENT;
        res[i].skipped = DLOCK_OK;
        res[i].detail[0] = '\0';
    }
}

int dlock__reply_is_error(const dlock__result *r, const char *prefix)
{
    if (r->status != DLOCK__R_REPLY || r->reply == NULL || r->reply->type != REDIS_REPLY_ERROR)
        return 0;
    if (prefix == NULL)
        return 1;
    return r->reply->str != NULL && strncmp(r->reply->str, prefix, strlen(prefix)) == 0;
}

static dlock_err node_code(const dlock__result *r)
{
    if (r->skipped != DLOCK_OK)
        return r->skipped;
    switch (r->status) {
    case DLOCK__R_TIMEOUT:
    case DLOCK__R_PENDING:
        return DLOCK_ERR_TIMEOUT;
    case DLOCK__R_AUTH:
        return DLOCK_ERR_AUTH;
    case DLOCK__R_REPLY:
        return DLOCK_ERR_PROTOCOL;
    case DLOCK__R_UNSENT:
    case DLOCK__R_DOWN:
    case DLOCK__R_IOERR:
        return DLOCK_ERR_UNREACHABLE;
    }
    return DLOCK_ERR_UNREACHABLE;
}

static void node_detail(const dlock__result *r, char *out, size_t outlen)
{
    if (r->status == DLOCK__R_REPLY && r->reply != NULL) {
        if (r->reply->type == REDIS_REPLY_ERROR)
            snprintf(out, outlen, "error reply: %s", r->reply->str != NULL ? r->reply->str : "");
        else
            snprintf(out, outlen, "unexpected reply type %d", r->reply->type);
        return;
    }
    snprintf(out, outlen, "%s", r->detail[0] != '\0' ? r->detail : "no answer");
}

/* Room left in an errstr for the "k/N nodes answered" that follows. */
#define TAIL_ROOM 40

/* Writes "node <addr>: <why>; " for every node in failed (not 0) into
 * out[DLOCK_ERRSTR_LEN], each why cut to an equal share of the room, so a
 * long reason cannot push a later node's name out. */
static void failed_nodes(const dlock_client *c, const dlock__result *res, uint32_t failed,
                         char *out)
{
    const size_t room = DLOCK_ERRSTR_LEN - TAIL_ROOM;
    size_t used = 0, share = room / dlock__popcount(failed);
    char why[DLOCK__DETAIL_LEN + 32];

    out[0] = '\0';
    for (size_t i = 0; i < c->n && used + 1 < room; i++) {
        size_t fixed;
        int m;

        if (!(failed & (1u << i)))
            continue;
        node_detail(&res[i], why, sizeof(why));
        fixed = strlen(c->nodes[i].addr.text) + sizeof("node : ; ") - 1;
        m = snprintf(out + used, room - used, "node %s: %.*s; ", c->nodes[i].addr.text,
                     share > fixed ? (int)(share - fixed) : 0, why);
        if (m < 0)
            break;
        used += (size_t)m < room - used ? (size_t)m : room - used - 1;
    }
}

/* Maps a round where too few nodes answered to the code the caller returns:
 * - with one node, its own failure (TIMEOUT, UNREACHABLE, AUTH, PROTOCOL);
 * - with N nodes, NO_QUORUM, unless every failed node failed the same
 *   configuration-like way (AUTH, PROTOCOL), which the operator must see.
 * Writes "node <addr>: <why>; " for each node that did not answer, then
 * "k/N nodes answered", into errbuf: a lost lock's detail must name every
 * silent node, not just the first. */
dlock_err dlock__unavailable(const dlock_client *c, const dlock__result *res, uint32_t mask,
                             uint32_t answered, char *errbuf)
{
    dlock_err code = DLOCK_ERR_NO_QUORUM;
    dlock_err common = DLOCK_OK;
    int mixed = 0;
    size_t first = c->n;
    uint32_t failed = 0;
    char names[DLOCK_ERRSTR_LEN];

    for (size_t i = 0; i < c->n; i++) {
        dlock_err e;
        if (!(mask & (1u << i)) || (answered & (1u << i)))
            continue;
        e = node_code(&res[i]);
        failed |= 1u << i;
        if (first == c->n) {
            first = i;
            common = e;
        } else if (e != common) {
            mixed = 1;
        }
    }
    if (c->n == 1)
        code = common != DLOCK_OK ? common : DLOCK_ERR_UNREACHABLE;
    else if (!mixed && (common == DLOCK_ERR_AUTH || common == DLOCK_ERR_PROTOCOL))
        code = common;
    if (failed != 0) {
        failed_nodes(c, res, failed, names);
        dlock__errf(errbuf, "%s%zu/%zu nodes answered", names, dlock__popcount(answered & mask),
                    c->n);
    } else {
        dlock__errf(errbuf, "%zu/%zu nodes answered, quorum is %zu",
                    dlock__popcount(answered & mask), c->n, c->quorum);
    }
    return code;
}

/* Counts the nodes that answered the integer `value`; their bits go to
 * *mask_out when it is not NULL. */
size_t dlock__count_int(const dlock__result *res, size_t n, long long value, uint32_t *mask_out)
{
    size_t k = 0;
    uint32_t mask = 0;

    for (size_t i = 0; i < n; i++) {
        if (res[i].status == DLOCK__R_REPLY && res[i].reply->type == REDIS_REPLY_INTEGER &&
            res[i].reply->integer == value) {
            k++;
            mask |= 1u << i;
        }
    }
    if (mask_out != NULL)
        *mask_out = mask;
    return k;
}

/* Stop rule for release and extend: once a quorum answered 1 the call has
 * succeeded, whatever the remaining nodes say. arg points to the quorum. */
int dlock__quorum_of_ones(const dlock__result *res, size_t n, void *arg)
{
    return dlock__count_int(res, n, 1, NULL) >= *(const size_t *)arg;
}

void dlock__nodes_text(const dlock_client *c, uint32_t mask, char *out, size_t outlen)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < c->n && used < outlen; i++) {
        int m;

        if (!(mask & (1u << i)))
            continue;
        m = snprintf(out + used, outlen - used, "%s%s", used ? ", " : "", c->nodes[i].addr.text);
        used += m > 0 ? (size_t)m : 0;
    }
}
