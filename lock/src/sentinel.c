/* sentinel.c - nodes given as "sentinel://h:p[,h:p...]/name": the master
 * is found through Redis Sentinel each time the node (re)connects, and
 * used only when it says it is one.
 *
 * Why blocking calls, under the client mutex: a round starts a node's
 * connect from inside its send loop (conn.c, dlock__conn_start), and the
 * node's connection state, reply stream and breaker are all guarded by the
 * mutex; letting go of it there would let another thread's round queue
 * commands on a half-made node. So the sentinels are asked right there with
 * plain blocking hiredis calls, each bounded: a connect by
 * connect_timeout_ms (hiredis connects non-blocking and polls), a command
 * by command_timeout_ms (SO_RCVTIMEO / SO_SNDTIMEO). The worst case, every
 * sentinel silent, holds the mutex for n_sentinels x (connect + command)
 * plus, per address named, one connect and two commands for the ROLE
 * check; it only happens on a reconnect, which follows a failure, and a
 * dead sentinel on a live host refuses at once. A node whose resolution
 * fails trips its breaker like any unreachable node, so a Redlock round
 * does not ask again before its probe is due.
 *
 * The sentinels are asked without AUTH (the client's password is the
 * masters'); the master named is checked with AUTH, then ROLE: a sentinel
 * that has not yet seen a failover (or a partitioned one) may name a node
 * that is now a replica, and writes must not go there. */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

static struct timeval tv_ms(int ms)
{
    struct timeval tv;

    tv.tv_sec = ms / 1000;
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    return tv;
}

/* A blocking connection to h, its commands bounded by the command timeout.
 * NULL with why in detail. */
static redisContext *open_bounded(const dlock_client *c, const dlock__hostport *h, char *detail)
{
    redisContext *ctx = redisConnectWithTimeout(h->host, h->port, tv_ms(c->connect_timeout_ms));

    if (ctx == NULL) {
        dlock__detailf(detail, "%s:%d: out of memory", h->host, h->port);
        return NULL;
    }
    if (ctx->err != 0 || redisSetTimeout(ctx, tv_ms(c->command_timeout_ms)) != REDIS_OK) {
        dlock__detailf(detail, "%s:%d: %s", h->host, h->port,
                       ctx->err != 0 ? ctx->errstr : "cannot set the timeout");
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

/* One command; NULL (with why in detail) when the connection failed or
 * timed out. The caller frees the context either way. */
static redisReply *call(redisContext *ctx, const dlock__hostport *h, int argc, const char **argv,
                        char *detail)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);

    if (r == NULL)
        dlock__detailf(detail, "%s:%d: %s: %s", h->host, h->port, argv[0], ctx->errstr);
    return r;
}

/* SENTINEL get-master-addr-by-name on sentinel s: 0 with the address in
 * *out, -1 with why in detail (down, silent, name unknown, odd reply). */
static int ask_sentinel(const dlock_client *c, const dlock__hostport *s, const char *name,
                        dlock__hostport *out, char *detail)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", name};
    redisContext *ctx = open_bounded(c, s, detail);
    redisReply *r;
    int rc = -1;

    if (ctx == NULL)
        return -1;
    r = call(ctx, s, 3, argv, detail);
    if (r == NULL) {
        redisFree(ctx);
        return -1;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
        r->element[0]->len > 0 && r->element[0]->len < sizeof(out->host)) {
        int port = 0, ok = r->element[1]->len >= 1 && r->element[1]->len <= 5;

        for (size_t i = 0; ok && i < r->element[1]->len; i++) {
            char d = r->element[1]->str[i];
            ok = d >= '0' && d <= '9';
            port = port * 10 + (d - '0');
        }
        if (ok && port >= 1 && port <= 65535) {
            memcpy(out->host, r->element[0]->str, r->element[0]->len);
            out->host[r->element[0]->len] = '\0';
            out->port = port;
            rc = 0;
        } else {
            dlock__detailf(detail, "sentinel %s:%d: bad port in its answer", s->host, s->port);
        }
    } else if (r->type == REDIS_REPLY_NIL) {
        dlock__detailf(detail, "sentinel %s:%d does not know master '%s'", s->host, s->port, name);
    } else if (r->type == REDIS_REPLY_ERROR) {
        dlock__detailf(detail, "sentinel %s:%d: %s", s->host, s->port,
                       r->str != NULL ? r->str : "error");
    } else {
        dlock__detailf(detail, "sentinel %s:%d: unexpected reply type %d", s->host, s->port,
                       r->type);
    }
    freeReplyObject(r);
    redisFree(ctx);
    return rc;
}

/* AUTH (with the client's credentials, if any) then ROLE on h: 0 when it
 * is a master, -1 with why in detail. */
static int check_master(const dlock_client *c, const dlock__hostport *h, char *detail)
{
    const char *role[1] = {"ROLE"};
    redisContext *ctx = open_bounded(c, h, detail);
    redisReply *r;
    int rc = -1;

    if (ctx == NULL)
        return -1;
    const char *auth[3];
    int argc = dlock__auth_argv(c, auth);

    if (argc > 0) {
        r = call(ctx, h, argc, auth, detail);
        if (r == NULL) {
            redisFree(ctx);
            return -1;
        }
        if (r->type == REDIS_REPLY_ERROR && r->str != NULL && !dlock__auth_not_needed(r)) {
            dlock__detailf(detail, "master %s:%d: AUTH refused: %s", h->host, h->port, r->str);
            freeReplyObject(r);
            redisFree(ctx);
            return -1;
        }
        freeReplyObject(r);
    }
    r = call(ctx, h, 1, role, detail);
    if (r == NULL) {
        redisFree(ctx);
        return -1;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        (r->element[0]->type == REDIS_REPLY_STRING || r->element[0]->type == REDIS_REPLY_STATUS) &&
        r->element[0]->str != NULL && strcmp(r->element[0]->str, "master") == 0) {
        rc = 0;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->str != NULL) {
        dlock__detailf(detail, "%s:%d: ROLE says %s, not master (stale sentinel answer)", h->host,
                       h->port, r->element[0]->str);
    } else if (r->type == REDIS_REPLY_ERROR) {
        dlock__detailf(detail, "%s:%d: ROLE: %s", h->host, h->port,
                       r->str != NULL ? r->str : "error");
    } else {
        dlock__detailf(detail, "%s:%d: ROLE: unexpected reply type %d", h->host, h->port,
                       r->type);
    }
    freeReplyObject(r);
    redisFree(ctx);
    return rc;
}

int dlock__sentinel_master(const dlock_client *c, const dlock__addr *a, dlock__hostport *out,
                           char *detail)
{
    dlock__hostport refused[DLOCK__MAX_SENTINELS];
    size_t n_refused = 0;
    dlock__sigpipe_guard guard;
    char why[DLOCK__DETAIL_LEN] = "no sentinel";
    int rc = -1;

    /* Blocking writes to a sentinel that reset the connection raise
     * SIGPIPE: a library must not let that kill its host. */
    dlock__sigpipe_block(&guard);
    for (size_t i = 0; i < a->n_sentinels && rc != 0; i++) {
        dlock__hostport m;
        int again = 0;

        if (ask_sentinel(c, &a->sentinels[i], a->master_name, &m, why) != 0)
            continue;
        /* Several stale sentinels usually name the same old master: one
         * refusal is enough, the others' turn comes without a new check. */
        for (size_t j = 0; j < n_refused; j++)
            again |= refused[j].port == m.port && strcasecmp(refused[j].host, m.host) == 0;
        if (again)
            continue;
        if (check_master(c, &m, why) == 0) {
            *out = m;
            rc = 0;
        } else {
            refused[n_refused++] = m;
        }
    }
    dlock__sigpipe_restore(&guard);
    if (rc != 0)
        dlock__detailf(detail, "sentinel: no master '%s': %s", a->master_name, why);
    return rc;
}

int dlock__sentinel_demoted(const dlock__addr *a, const redisReply *reply)
{
    /* Redis 7 passes a script's write error up with its own code; older
     * servers wrap it ("ERR Error running script ... -READONLY ..."). */
    return a->is_sentinel && reply != NULL && reply->type == REDIS_REPLY_ERROR &&
           reply->str != NULL &&
           (strncmp(reply->str, "READONLY", 8) == 0 || strstr(reply->str, "-READONLY") != NULL);
}
