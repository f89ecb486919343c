/* async_wake.c - the event-loop client's wakers: a connection of its own
 * per waiting acquire and node, for the BLPOP that waits for a hand-off (a
 * BLPOP blocks the connection it runs on). Connected without blocking,
 * with TLS and AUTH as the round connections; a BLPOP goes out only once
 * AUTH is accepted, never as the server's default user. What a waker
 * hears reaches its owner through a callback that only records it: the
 * owner acts from its own timer, outside hiredis. Pooled per client. */
#include "async_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dlock__awaker {
    dlock_async *a;
    size_t node;
    redisAsyncContext *ac;   /* NULL when closed */
    int ready;               /* AUTH accepted, or none needed */
    int popping;             /* a BLPOP is out, its answer owed */
    int idle;                /* in the pool, no acquire uses it */
    const char *list;        /* the BLPOP to send once ready: its list */
    int64_t pop_until;       /* and its end, our clock; 0 none due */
    dlock__awaker_news news; /* the owner's, or NULL */
    void *owner;
    void *timer;             /* connect (and AUTH) timeout */
    dlock__awaker *next;     /* every waker of the client (a->wakers) */
};

void dlock__awaker_close(dlock__awaker *w)
{
    redisAsyncContext *ac = w->ac;

    w->a->loop.timer_stop(w->timer);
    w->ac = NULL;
    w->ready = 0;
    w->popping = 0;
    w->pop_until = 0;
    if (ac != NULL)
        dlock__async_bury(w->a, ac);
}

static void tell(dlock__awaker *w, int heard, const char *msg)
{
    if (w->news != NULL)
        w->news(w->owner, w->node, heard, msg);
}

static void lost(dlock__awaker *w)
{
    dlock__awaker_close(w);
    tell(w, DLOCK__HEARD_LOST, NULL);
}

static void pop_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    dlock__awaker *w = privdata;
    const redisReply *r = reply;

    if (ac != w->ac || r == NULL)
        return; /* closed: whoever closed it has said so */
    w->popping = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len < DLOCK__RQ_MSG_LEN)
        tell(w, DLOCK__HEARD_MESSAGE, r->element[1]->str);
    else if (r->type == REDIS_REPLY_NIL)
        tell(w, DLOCK__HEARD_NIL, NULL);
    else
        lost(w); /* an error, or no message of ours: never read again */
}

/* The BLPOP due, bounded on the server too: its nil frees the connection
 * for the next wait. */
static void pop_send(dlock__awaker *w)
{
    int64_t block_ms = w->pop_until - dlock_now_ms();
    char secs[32];
    const char *argv[3] = {"BLPOP", w->list, secs};

    w->pop_until = 0;
    if (block_ms < 1)
        block_ms = 1;
    snprintf(secs, sizeof(secs), "%lld.%03lld", (long long)(block_ms / 1000),
             (long long)(block_ms % 1000));
    if (redisAsyncCommandArgv(w->ac, pop_reply, w, 3, argv, NULL) != REDIS_OK) {
        lost(w);
        return;
    }
    w->popping = 1;
}

static void auth_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    dlock__awaker *w = privdata;
    const redisReply *r = reply;

    if (ac != w->ac || r == NULL)
        return;
    if (r->type == REDIS_REPLY_ERROR) {
        /* As on the round connections: never a wait as the server's
         * default user; the owner backs off instead. */
        lost(w);
        return;
    }
    w->ready = 1;
    w->a->loop.timer_stop(w->timer);
    if (w->pop_until != 0 && !w->popping)
        pop_send(w);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    dlock__awaker *w = ac->data;

    if (w == NULL || ac != w->ac)
        return;
    if (status == REDIS_OK) {
        if (w->ready)
            w->a->loop.timer_stop(w->timer); /* no AUTH to wait for */
        return;
    }
    w->ac = NULL; /* hiredis frees the context after this callback */
    lost(w);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    dlock__awaker *w = ac->data;

    (void)status;
    if (w == NULL || ac != w->ac)
        return;
    w->ac = NULL;
    lost(w);
}

static void on_timeout(void *arg)
{
    dlock__awaker *w = arg;
    dlock_async *a = w->a;

    dlock__async_enter(a);
    lost(w);
    dlock__async_leave(a);
}

/* Connects to the waker's node, bounded by the connect timeout. 0, or -1
 * when it cannot start. */
static int waker_connect(dlock__awaker *w)
{
    dlock_async *a = w->a;
    dlock_client *c = a->c;
    const char *argv[3];
    char why[DLOCK__DETAIL_LEN];
    redisAsyncContext *ac;
    int argc;

    if (dlock__async_open(a, &c->nodes[w->node].addr, &w->ac, &ac, why) != 0)
        return -1;
    ac->data = w;
    w->ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    argc = dlock__auth_argv(c, argv);
    w->ready = argc == 0;
    if (argc > 0 && redisAsyncCommandArgv(ac, auth_reply, w, argc, argv, NULL) != REDIS_OK) {
        dlock__awaker_close(w);
        return -1;
    }
    a->loop.timer_set(w->timer, c->connect_timeout_ms);
    return 0;
}

int dlock__awaker_pop(dlock__awaker *w, const char *list, int64_t until_ms)
{
    if (w->popping)
        return 0; /* one is out on this list already */
    if (w->ac == NULL && waker_connect(w) != 0)
        return -1;
    w->list = list;
    w->pop_until = until_ms;
    if (w->ready)
        pop_send(w);
    return 0;
}

int dlock__awaker_up(const dlock__awaker *w)
{
    return w != NULL && w->ac != NULL;
}

int dlock__awaker_quiet(const dlock__awaker *w)
{
    return w == NULL || (!w->popping && w->pop_until == 0);
}

dlock__awaker *dlock__awaker_take(dlock_async *a, size_t node, dlock__awaker_news news,
                                  void *owner)
{
    dlock__awaker *w;

    for (w = a->wakers; w != NULL; w = w->next)
        if (w->idle && w->node == node)
            break;
    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w == NULL)
            return NULL;
        w->a = a;
        w->node = node;
        w->timer = a->loop.timer_new(a->loop.loop, on_timeout, w);
        if (w->timer == NULL) {
            free(w);
            return NULL;
        }
        w->next = a->wakers;
        a->wakers = w;
    }
    w->idle = 0;
    w->news = news;
    w->owner = owner;
    return w;
}

void dlock__awaker_put(dlock__awaker *w)
{
    if (w == NULL)
        return;
    /* A BLPOP still out is not the next owner's to read. */
    if (w->popping || !w->ready)
        dlock__awaker_close(w);
    w->news = NULL;
    w->owner = NULL;
    w->idle = 1;
}

void dlock__awakers_free(dlock_async *a)
{
    while (a->wakers != NULL) {
        dlock__awaker *w = a->wakers;

        a->wakers = w->next;
        w->news = NULL;
        if (w->ac != NULL) {
            redisAsyncContext *ac = w->ac;

            w->ac = NULL;
            ac->data = NULL;
            redisAsyncFree(ac); /* its callbacks see a closed waker */
        }
        a->loop.timer_free(w->timer);
        free(w);
    }
}
