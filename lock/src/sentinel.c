/* sentinel.c - nodes given as "sentinel://h:p[,h:p...]/name": the master
 * is found through Redis Sentinel each time the node (re)connects, and
 * used only when it says it is one.
 *
 * Why a thread of its own, without the client mutex: the asking is plain
 * blocking hiredis calls. Each is bounded (a connect by connect_timeout_ms, a
 * command by command_timeout_ms). So it can take n_sentinels x
 * (connect + command) plus, per address named, one connect and two commands
 * for the ROLE check. Done under the mutex (from inside a round's connect,
 * say), that would stall every other call on the client, the watchdog's
 * renewals of every lock included. Short-TTL locks would then be reported
 * lost while still held (lock_sentinel_share tests it). The mutex cannot be
 * let go inside a round either (another thread's round would queue commands
 * on a half-made node). So a round whose sentinel node has no connection and
 * no fresh answer fails that node at once and asks the resolver thread
 * (dlock__conn_ask_master); the thread asks the sentinels with the mutex
 * released and publishes the answer under it. A call that starts, or retries,
 * waits for that answer with the mutex released (dlock__sentinel_await), so
 * it connects to the new master in the same call; the watchdog never waits,
 * it retries its renewal. A node whose resolution fails trips its breaker
 * like any unreachable node, so a Redlock round does not ask again before its
 * probe is due.
 *
 * The sentinels are asked without AUTH (the client's password is the
 * masters'). The master named is checked with AUTH, then ROLE: a sentinel
 * that has not yet seen a failover (or a partitioned one) may name a node
 * that is now a replica, and writes must not go there. */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

/* A blocking connection to h, its commands bounded by the command timeout,
 * over TLS when tls (the node's: a client with tls set speaks it to the
 * sentinels and the masters alike). NULL with why in detail. */
static redisContext *open_bounded(const dlock_client *c, const dlock__hostport *h, int tls,
                                  char *detail)
{
    redisContext *ctx = redisConnectWithTimeout(h->host, h->port, dlock__tv_ms(c->connect_timeout_ms));

    if (ctx == NULL) {
        dlock__detailf(detail, "%s:%d: out of memory", h->host, h->port);
        return NULL;
    }
    if (ctx->err != 0 || redisSetTimeout(ctx, dlock__tv_ms(c->command_timeout_ms)) != REDIS_OK) {
        dlock__detailf(detail, "%s:%d: %s", h->host, h->port,
                       ctx->err != 0 ? ctx->errstr : "cannot set the timeout");
        redisFree(ctx);
        return NULL;
    }
    dlock__reader_bound(ctx);
    /* After redisSetTimeout: the handshake's reads and writes are bounded
     * by the same command timeout as any command's. */
    if (tls) {
        char why[DLOCK__DETAIL_LEN];

        if (dlock__tls_start(c->tls, ctx, h->host, NULL, why) != 0) {
            dlock__detailf(detail, "%s:%d: %s", h->host, h->port, why);
            redisFree(ctx);
            return NULL;
        }
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
static int ask_sentinel(const dlock_client *c, const dlock__hostport *s, int tls, const char *name,
                        dlock__hostport *out, char *detail)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", name};
    redisContext *ctx = open_bounded(c, s, tls, detail);
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
static int check_master(const dlock_client *c, const dlock__hostport *h, int tls, char *detail)
{
    const char *role[1] = {"ROLE"};
    redisContext *ctx = open_bounded(c, h, tls, detail);
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
        if (r->type == REDIS_REPLY_ERROR && r->str != NULL) {
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

        if (ask_sentinel(c, &a->sentinels[i], a->tls, a->master_name, &m, why) != 0)
            continue;
        /* Several stale sentinels usually name the same old master: one
         * refusal is enough, the others' turn comes without a new check. */
        for (size_t j = 0; j < n_refused; j++)
            again |= refused[j].port == m.port && strcasecmp(refused[j].host, m.host) == 0;
        if (again)
            continue;
        if (check_master(c, &m, a->tls, why) == 0) {
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

/* ---- the resolver thread ---- */

/* The longest one asking can take (see the file comment). */
static int64_t asking_bound_ms(const dlock_client *c, const dlock__addr *a)
{
    return (int64_t)(a->n_sentinels + 1) * (c->connect_timeout_ms + 2 * c->command_timeout_ms);
}

/* Asks for node i's master without the mutex (held on entry and return):
 * the address and the client's options are immutable. */
static void ask_unlocked(dlock_client *c, size_t i)
{
    dlock__node *node = &c->nodes[i];
    dlock__hostport m;
    char why[DLOCK__DETAIL_LEN] = "";
    int rc;

    node->master_asking = 2;
    pthread_mutex_unlock(&c->mu);
    memset(&m, 0, sizeof(m));
    rc = dlock__sentinel_master(c, &node->addr, &m, why);
    pthread_mutex_lock(&c->mu);
    if (rc == 0) {
        node->master = m;
        node->master_fresh = 1;
        node->master_why[0] = '\0';
    } else {
        node->master_fresh = 0;
        dlock__detailf(node->master_why, "%s", why);
    }
    node->master_asking = 0;
    pthread_cond_broadcast(&c->rs_done);
}

static void *resolver_main(void *arg)
{
    dlock_client *c = arg;

    pthread_mutex_lock(&c->mu);
    while (!c->rs_stop) {
        size_t i;

        for (i = 0; i < c->n; i++) {
            if (c->nodes[i].master_asking == 1)
                break;
        }
        if (i == c->n) {
            pthread_cond_wait(&c->rs_cond, &c->mu);
            continue;
        }
        ask_unlocked(c, i);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int dlock__sentinel_start(dlock_client *c)
{
    int any = 0;

    /* The first connect's answers: no other thread has the client yet, so
     * asking here blocks nobody but the caller of dlock_client_new. */
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        char why[DLOCK__DETAIL_LEN] = "";

        if (!node->addr.is_sentinel)
            continue;
        any = 1;
        if (dlock__sentinel_master(c, &node->addr, &node->master, why) == 0)
            node->master_fresh = 1;
        else
            dlock__detailf(node->master_why, "%s", why);
    }
    if (!any)
        return 0;
    if (pthread_create(&c->rs_thread, NULL, resolver_main, c) != 0)
        return -1;
    c->rs_started = 1;
    return 0;
}

void dlock__sentinel_stop(dlock_client *c)
{
    if (!c->rs_started)
        return;
    pthread_mutex_lock(&c->mu);
    c->rs_stop = 1;
    pthread_cond_signal(&c->rs_cond);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->rs_thread, NULL);
    c->rs_started = 0;
}

/* A sentinel node whose next connect has no answer to use. */
static int needs_answer(const dlock__node *node)
{
    return node->addr.is_sentinel && node->same_as == 0 && node->state == DLOCK__DOWN &&
           !node->master_fresh;
}

void dlock__sentinel_await(dlock_client *c, int64_t until_ms)
{
    int64_t bound = 0, now = dlock_now_ms();
    size_t healthy = 0;
    int any = 0;

    if (!c->rs_started)
        return;
    /* A connection the server closed (a master that died) is only found
     * when a round looks: look now, so that its node is asked for before
     * the round, not failed by it. Nothing here waits. */
    dlock__conn_prepare(c);
    for (size_t i = 0; i < c->n; i++)
        healthy += !c->nodes[i].breaker.open;
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];

        if (!needs_answer(node))
            continue;
        /* A node that keeps failing is not waited for on every call while
         * the others make a quorum without it: its breaker's probe
         * schedule says when it is worth asking again, as for any node. */
        if (node->breaker.open && !dlock__breaker_probe_due(node, now) && healthy >= c->quorum)
            continue;
        dlock__conn_ask_master(c, node);
        if (asking_bound_ms(c, &node->addr) > bound)
            bound = asking_bound_ms(c, &node->addr);
        any = 1;
    }
    if (!any)
        return;
    if (until_ms > now + bound)
        until_ms = now + bound;
    for (;;) {
        struct timespec ts;
        int waiting = 0;

        for (size_t i = 0; i < c->n; i++)
            waiting |= needs_answer(&c->nodes[i]) && c->nodes[i].master_asking != 0;
        if (!waiting || dlock_now_ms() >= until_ms)
            return;
        dlock__cond_deadline(until_ms, &ts);
        (void)pthread_cond_timedwait(&c->rs_done, &c->mu, &ts);
    }
}
