/* async_conn.c - the event-loop client's connections: hiredis async
 * contexts on the caller's loop (dlock_loop), connected without blocking.
 * AUTH and INFO are answered through the same handshake rule as the
 * blocking client's (dlock__conn_handshake_reply), and commands are held
 * back until AUTH is accepted. Every rule that drops a node
 * (dlock__node_close) drops the context here too. */
#include "async_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the loop frame ---- */

static void free_dead(dlock_async *a)
{
    while (a->n_dead > 0) {
        redisAsyncContext *ac = a->dead[--a->n_dead];

        /* Runs every pending callback with NULL: their rounds see the
         * connection gone and are marked dirty. */
        redisAsyncFree(ac);
    }
}

/* The held commands of closed connections fail now, when the rule that
 * closed them has said why (the breaker's detail). */
static void fail_orphans(dlock_async *a)
{
    while (a->orphans != NULL) {
        dlock__ticket *t = a->orphans;

        a->orphans = t->next_deferred;
        t->next_deferred = NULL;
        dlock__around_reply(NULL, NULL, t);
    }
}

void dlock__async_kick(dlock_async *a)
{
    if (a->draining)
        return;
    a->draining = 1;
    while (a->dirty != NULL || a->n_dead > 0 || a->orphans != NULL) {
        dlock__around *r = a->dirty;

        fail_orphans(a);
        if (r == NULL) {
            free_dead(a);
            continue;
        }
        a->dirty = r->next_dirty;
        r->dirty = 0;
        dlock__around_settle(r);
    }
    a->draining = 0;
}

void dlock__async_wake(dlock_async *a)
{
    /* Inside the drain the loop above picks it up; else the loop does. */
    if (!a->draining)
        a->loop.timer_set(a->kick, 0);
}

void dlock__async_enter(dlock_async *a)
{
    a->depth++;
}

void dlock__async_leave(dlock_async *a)
{
    if (a->depth == 1)
        dlock__async_kick(a);
    a->depth--;
    if (a->depth == 0 && a->free_pending)
        dlock_async_free(a);
}

/* ---- hiredis's event hooks, onto the caller's loop ---- */

/* Each context has its own watch, in hiredis's ev.data: a node may have a
 * closed context waiting to be freed (dead) beside a new one. */
typedef struct ctx_watch {
    dlock_async *a;
    redisAsyncContext *const *live; /* where its owner keeps its live context */
    redisAsyncContext *ac;
    void *watch;
    int events;
} ctx_watch;

static void cw_set(ctx_watch *w, int events)
{
    w->events = events;
    w->a->loop.watch_set(w->watch, events);
}

static void cw_add_read(void *p) { ctx_watch *w = p; cw_set(w, w->events | DLOCK_LOOP_READ); }
static void cw_del_read(void *p) { ctx_watch *w = p; cw_set(w, w->events & ~DLOCK_LOOP_READ); }
static void cw_add_write(void *p) { ctx_watch *w = p; cw_set(w, w->events | DLOCK_LOOP_WRITE); }
static void cw_del_write(void *p) { ctx_watch *w = p; cw_set(w, w->events & ~DLOCK_LOOP_WRITE); }

static void cw_cleanup(void *p)
{
    ctx_watch *w = p;

    w->a->loop.watch_free(w->watch);
    free(w);
}

/* The socket is ready: hiredis reads or writes, running reply callbacks;
 * what they started is settled when this frame ends. */
static void on_ready(void *arg, int events)
{
    ctx_watch *w = arg;
    /* w goes with the context if hiredis frees it; its owner stays. */
    redisAsyncContext *const *live = w->live;
    dlock_async *a = w->a;
    redisAsyncContext *ac = w->ac;

    if (*live != ac)
        return; /* closed by a rule: nothing more is read from it */
    dlock__async_enter(a);
    /* Both directions at once: a write can free the context (hiredis
     * disconnects on an error), and w with it, so read first and look
     * again. The context is alive while it is the node's or in dead. */
    if (events & DLOCK_LOOP_READ)
        redisAsyncHandleRead(ac);
    if ((events & DLOCK_LOOP_WRITE) && *live == ac)
        redisAsyncHandleWrite(ac);
    dlock__async_leave(a);
}

/* ---- replies of our own: AUTH and INFO ---- */

static redisReply *reply_dup(const redisReply *r)
{
    redisReply *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->type = r->type;
    d->integer = r->integer;
    if (r->str != NULL) {
        d->str = malloc(r->len + 1);
        if (d->str == NULL) {
            free(d);
            return NULL;
        }
        memcpy(d->str, r->str, r->len);
        d->str[r->len] = '\0';
        d->len = r->len;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        d->element = calloc(r->elements, sizeof(*d->element));
        if (d->element == NULL) {
            freeReplyObject(d);
            return NULL;
        }
        d->elements = r->elements;
        for (size_t k = 0; k < r->elements; k++) {
            d->element[k] = reply_dup(r->element[k]);
            if (d->element[k] == NULL) {
                freeReplyObject(d);
                return NULL;
            }
        }
    }
    return d;
}

redisReply *dlock__async_reply_dup(const redisReply *r)
{
    return reply_dup(r);
}

/* The deferred commands of an node go (AUTH accepted) or fail (refused,
 * closed): their rounds' slots say why. */
static void flush_deferred(dlock__anode *an, int send)
{
    dlock__ticket *t = an->deferred;

    an->deferred = NULL;
    an->deferred_tail = &an->deferred;
    while (t != NULL) {
        dlock__ticket *next = t->next_deferred;

        t->next_deferred = NULL;
        if (send && an->ac != NULL &&
            redisAsyncFormattedCommand(an->ac, dlock__around_reply, t, t->cmd, (size_t)t->len) ==
                REDIS_OK) {
            redisFreeCommand(t->cmd);
            t->cmd = NULL;
        } else {
            /* Never sent: a NULL reply tells its round the node is gone,
             * once the rule that closed it has said why (fail_orphans). */
            redisFreeCommand(t->cmd);
            t->cmd = NULL;
            t->next_deferred = an->a->orphans;
            an->a->orphans = t;
            dlock__async_wake(an->a);
        }
        t = next;
    }
}

static void handshake_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    dlock__anode *an = privdata;
    dlock_client *c = an->a->c;
    dlock__node *node = &c->nodes[an->i];
    redisReply *copy;
    int auth = node->auth_pending;

    if (reply == NULL || ac != an->ac)
        return; /* the connection went: its close said why */
    node->heard_ms = dlock_now_ms();
    copy = reply_dup(reply);
    if (copy == NULL) {
        dlock__node_close(node);
        dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, "out of memory reading a reply");
        return;
    }
    if (dlock__conn_handshake_reply(c, node, copy) == DLOCK__CONN_SAME_SERVER) {
        dlock__conn_refuse(c, node);
        return;
    }
    if (!auth)
        return;
    if (node->auth_failed) {
        /* Closed so the next call authenticates afresh; the held commands
         * fail with the server's words (the round reads auth_detail). */
        flush_deferred(an, 0);
        dlock__node_close(node);
        return;
    }
    flush_deferred(an, 1);
}

/* ---- connecting ---- */

static void on_connect(const redisAsyncContext *ac, int status)
{
    dlock__anode *an = ac->data;
    dlock_client *c;
    dlock__node *node;
    char why[DLOCK__DETAIL_LEN];

    if (an == NULL || an->ac != ac)
        return;
    c = an->a->c;
    node = &c->nodes[an->i];
    if (status == REDIS_OK) {
        an->connected = 1;
        node->state = DLOCK__UP;
        an->a->loop.timer_stop(an->timer);
        return;
    }
    /* hiredis frees the context after this callback. */
    dlock__detailf(why, "connect: %s", ac->errstr);
    an->ac = NULL;
    dlock__node_close(node);
    dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, why);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    dlock__anode *an = ac->data;
    dlock_client *c;
    dlock__node *node;
    char why[DLOCK__DETAIL_LEN];

    (void)status;
    if (an == NULL || an->ac != ac)
        return; /* closed by us: already in dead, or freed */
    c = an->a->c;
    node = &c->nodes[an->i];
    dlock__detailf(why, "connection lost: %s", ac->errstr[0] != '\0' ? ac->errstr : "closed");
    an->ac = NULL;
    dlock__node_close(node);
    dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, why);
}

/* The connect timeout: a loop timer, as conn.c's poll deadline. */
static void on_connect_timeout(void *arg)
{
    dlock__anode *an = arg;
    dlock__node *node = &an->a->c->nodes[an->i];

    dlock__async_enter(an->a);
    dlock__conn_expire(an->a->c, node, dlock_now_ms());
    dlock__async_leave(an->a);
}

int dlock__async_attach(dlock_async *a, redisAsyncContext *const *live, redisAsyncContext *ac)
{
    ctx_watch *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return -1;
    w->a = a;
    w->live = live;
    w->ac = ac;
    w->watch = a->loop.watch_new(a->loop.loop, ac->c.fd, on_ready, w);
    if (w->watch == NULL) {
        free(w);
        return -1;
    }
    ac->ev.data = w;
    ac->ev.addRead = cw_add_read;
    ac->ev.delRead = cw_del_read;
    ac->ev.addWrite = cw_add_write;
    ac->ev.delWrite = cw_del_write;
    ac->ev.cleanup = cw_cleanup;
    return 0;
}

int dlock__async_open(dlock_async *a, const dlock__addr *addr, redisAsyncContext *const *live,
                      redisAsyncContext **out, char *detail)
{
    dlock_client *c = a->c;
    redisAsyncContext *ac = addr->is_unix ? redisAsyncConnectUnix(addr->host)
                                          : redisAsyncConnect(addr->host, addr->port);

    if (ac == NULL || ac->err != 0) {
        dlock__detailf(detail, "connect: %s", ac != NULL ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        return -1;
    }
    dlock__reader_bound(&ac->c);
    if (dlock__async_attach(a, live, ac) != 0) {
        redisAsyncFree(ac);
        dlock__detailf(detail, "out of memory watching the connection");
        return -2;
    }
    /* TLS as on the blocking client's connections (tls.c): started at
     * once, the handshake driven by hiredis's own reads and writes after
     * the TCP connect; a stall costs the round's command timeout. */
    if (addr->tls && c->tls != NULL &&
        dlock__tls_start(c->tls, &ac->c, addr->host, NULL, detail) != 0) {
        redisAsyncFree(ac);
        return -1;
    }
    *out = ac;
    return 0;
}

/* Starts the connect of node i and queues AUTH and INFO (the handshake
 * commands go first; a command waits for AUTH's answer, as in rounds.c). */
static int connect_node(dlock_async *a, size_t i, char *detail)
{
    dlock__anode *an = &a->an[i];
    dlock_client *c = a->c;
    dlock__node *node = &c->nodes[i];
    redisAsyncContext *ac;
    const char *argv[3];
    size_t argvlen[3];
    int argc;

    if (node->same_as != 0) {
        dlock__detailf(detail, "%s", node->same_detail);
        return -1;
    }
    switch (dlock__async_open(a, &node->addr, &an->ac, &ac, detail)) {
    case 0:
        break;
    case -1:
        dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, detail);
        return -1;
    default:
        return -1;
    }
    ac->data = an;
    an->ac = ac;
    an->connected = 0;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    dlock__conn_fresh(node);
    argc = dlock__auth_argv(c, argv);
    if (argc > 0) {
        for (int k = 0; k < argc; k++)
            argvlen[k] = strlen(argv[k]);
        if (redisAsyncCommandArgv(ac, handshake_reply, an, argc, argv, argvlen) != REDIS_OK)
            goto oom;
        node->auth_pending = 1;
    }
    /* INFO's default sections: run_id (one server, one vote) and
     * cluster_enabled, read by the same rule as the blocking client's. */
    {
        static const char *const info_argv[1] = {"INFO"};
        static const size_t info_len[1] = {4};

        if (redisAsyncCommandArgv(ac, handshake_reply, an, 1, (const char **)info_argv,
                                  info_len) != REDIS_OK)
            goto oom;
        node->runid_pending = 1;
    }
    a->loop.timer_set(an->timer, c->connect_timeout_ms);
    return 0;
oom:
    dlock__detailf(detail, "out of memory queueing the handshake");
    dlock__node_close(node);
    return -1;
}

int dlock__anode_send(dlock_async *a, size_t i, dlock__ticket *t, int argc, const char **argv,
                      const size_t *argvlen, char *detail)
{
    dlock__anode *an = &a->an[i];
    dlock__node *node = &a->c->nodes[i];

    if (node->state == DLOCK__DOWN && connect_node(a, i, detail) != 0)
        return -1;
    /* Silence is counted from the oldest answer still due. */
    if (node->stale == 0 && node->state == DLOCK__UP)
        node->heard_ms = dlock_now_ms();
    if (node->auth_pending) {
        /* A command pipelined behind an unanswered AUTH would run as the
         * server's default user if the AUTH is refused: held back. */
        t->len = redisFormatCommandArgv(&t->cmd, argc, argv, argvlen);
        if (t->len < 0) {
            t->cmd = NULL;
            dlock__detailf(detail, "out of memory queueing the command");
            return -1;
        }
        *an->deferred_tail = t;
        an->deferred_tail = &t->next_deferred;
        return 0;
    }
    if (redisAsyncCommandArgv(an->ac, dlock__around_reply, t, argc, argv, argvlen) != REDIS_OK) {
        dlock__detailf(detail, "the connection is closing");
        return -1;
    }
    return 0;
}

/* dlock__node_close's part here: the context leaves the node at once and
 * is freed when hiredis has returned (dead), its pending callbacks then
 * telling their rounds; the held commands fail now. */
void dlock__async_node_close(dlock__node *node)
{
    dlock__anode *an = node->async;
    dlock_async *a = an->a;
    redisAsyncContext *ac = an->ac;

    a->loop.timer_stop(an->timer);
    an->ac = NULL;
    an->connected = 0;
    flush_deferred(an, 0);
    if (ac == NULL)
        return;
    dlock__async_bury(a, ac);
}

void dlock__async_bury(dlock_async *a, redisAsyncContext *ac)
{
    ac->data = NULL; /* its connect and disconnect callbacks are no longer ours */
    if (a->n_dead < sizeof(a->dead) / sizeof(a->dead[0])) {
        a->dead[a->n_dead++] = ac;
    } else {
        /* More closes in one frame than ever expected: free it now (its
         * callbacks only record and mark, never settle, inside a frame). */
        redisAsyncFree(ac);
    }
    dlock__async_wake(a);
}

int dlock__anode_init(dlock_async *a, size_t i)
{
    dlock__anode *an = &a->an[i];

    an->a = a;
    an->i = i;
    an->deferred = NULL;
    an->deferred_tail = &an->deferred;
    an->timer = a->loop.timer_new(a->loop.loop, on_connect_timeout, an);
    if (an->timer == NULL)
        return -1;
    a->c->nodes[i].async = an;
    return 0;
}

void dlock__anodes_free(dlock_async *a)
{
    for (size_t i = 0; i < a->c->n; i++) {
        dlock__anode *an = &a->an[i];

        if (a->c->nodes[i].async == NULL)
            continue;
        dlock__node_close(&a->c->nodes[i]);
        a->c->nodes[i].async = NULL;
        if (an->timer != NULL)
            a->loop.timer_free(an->timer);
        an->timer = NULL;
    }
    free_dead(a);
}
