/* wake.c - wake on release: instead of polling with backoff, a waiter
 * blocks in BLPOP on its own list until the holder's release hands it the
 * key and pushes that key's fence there (pass.lua). See script.c for the
 * scripts and docs/single-instance.md for the algorithm.
 *
 * Each waiting thread blocks on its own connection (a dlock__waker from the
 * client's pool), never on the client's round connections and never with
 * the client mutex held: rounds of other threads and the watchdog go on
 * while it waits. Redis serves clients blocked on one list in arrival
 * order, so waiters are woken first-come first-served. Every call here is
 * bounded: connect by connect_timeout_ms, commands by command_timeout_ms,
 * BLPOP by the holder's remaining TTL and the caller's deadline. */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/time.h>

/* Client mutex held. NULL when out of memory: the caller polls instead. */
dlock__waker *dlock__waker_take(dlock_client *c)
{
    dlock__waker *w = c->wakers;

    if (w != NULL) {
        c->wakers = w->next;
        w->next = NULL;
        return w;
    }
    return calloc(1, sizeof(*w));
}

/* Client mutex held; NULL ok. */
void dlock__waker_put(dlock_client *c, dlock__waker *w)
{
    if (w == NULL)
        return;
    w->next = c->wakers;
    c->wakers = w;
}

static void waker_close(dlock__waker *w, size_t i)
{
    w->pending &= ~(1u << i);
    if (w->ctx[i] != NULL) {
        redisFree(w->ctx[i]);
        w->ctx[i] = NULL;
    }
}

/* A BLPOP of an earlier acquisition may still owe its reply on node i.
 * Read it if it came (a message for an old token: that acquisition's
 * release or leave.lua dealt with the key). Else close the connection,
 * never reused with a stale reply in its stream. */
static void settle(dlock__waker *w, size_t i)
{
    void *old = NULL;
    struct pollfd p;

    if (w->ctx[i] == NULL || !(w->pending & (1u << i)))
        return;
    p.fd = w->ctx[i]->fd;
    p.events = POLLIN;
    p.revents = 0;
    if (redisGetReplyFromReader(w->ctx[i], &old) == REDIS_OK && old == NULL &&
        poll(&p, 1, 0) == 1 && redisBufferRead(w->ctx[i]) == REDIS_OK)
        (void)redisGetReplyFromReader(w->ctx[i], &old);
    if (old != NULL) {
        freeReplyObject(old);
        w->pending &= ~(1u << i);
    } else {
        waker_close(w, i);
    }
}

/* Every BLPOP an earlier user left pending: settled (rqueue.c calls this
 * when it takes a waker, so that no old list's message reads as its own). */
void dlock__waker_settle(dlock__waker *w)
{
    for (size_t i = 0; i < DLOCK_MAX_NODES; i++)
        settle(w, i);
}

/* Only when no thread waits any more (dlock_client_free). */
void dlock__wakers_free(dlock_client *c)
{
    while (c->wakers != NULL) {
        dlock__waker *w = c->wakers;

        c->wakers = w->next;
        for (size_t i = 0; i < DLOCK_MAX_NODES; i++)
            waker_close(w, i);
        free(w);
    }
}

/* One command on a blocking connection, bounded by timeout_ms (hiredis
 * sets SO_RCVTIMEO / SO_SNDTIMEO). NULL when the connection failed: it is
 * then closed, to be reopened by the next wait. */
static redisReply *call(dlock__waker *w, size_t i, int64_t timeout_ms, int argc,
                        const char **argv)
{
    redisReply *r;

    if (redisSetTimeout(w->ctx[i], dlock__tv_ms(timeout_ms)) != REDIS_OK) {
        waker_close(w, i);
        return NULL;
    }
    r = redisCommandArgv(w->ctx[i], argc, argv, NULL);
    if (r == NULL)
        waker_close(w, i);
    return r;
}

int dlock__waker_open(const dlock_client *c, dlock__waker *w, size_t i)
{
    const dlock__addr *a = &c->nodes[i].addr;
    struct timeval tv = dlock__tv_ms(c->connect_timeout_ms);
    redisReply *r;
    dlock__hostport m;
    const char *host = a->host;

    settle(w, i);
    if (w->ctx[i] != NULL)
        return 0;
    if (a->is_sentinel) {
        char why[DLOCK__DETAIL_LEN];

        /* The waiter's own connection follows the sentinels like the
         * rounds' one (sentinel.c; immutable fields only, no mutex). */
        if (dlock__sentinel_master(c, a, &m, why) != 0)
            return -1;
        host = m.host;
        w->ctx[i] = redisConnectWithTimeout(m.host, m.port, tv);
    } else {
        w->ctx[i] = a->is_unix ? redisConnectUnixWithTimeout(a->host, tv)
                               : redisConnectWithTimeout(a->host, a->port, tv);
    }
    if (w->ctx[i] == NULL)
        return -1;
    if (w->ctx[i]->err) {
        waker_close(w, i);
        return -1;
    }
    dlock__reader_bound(w->ctx[i]);
    if (a->tls) {
        char why[DLOCK__DETAIL_LEN];

        /* The handshake's reads and writes bounded like a command's. */
        if (redisSetTimeout(w->ctx[i], dlock__tv_ms(c->command_timeout_ms)) != REDIS_OK ||
            dlock__tls_start(c->tls, w->ctx[i], host, NULL, why) != 0) {
            waker_close(w, i);
            return -1;
        }
    }
    {
        const char *argv[3];
        int argc = dlock__auth_argv(c, argv);

        if (argc == 0)
            return 0;
        r = call(w, i, c->command_timeout_ms, argc, argv);
    }
    if (r == NULL)
        return -1;
    /* As on the round connections (conn.c): any refusal, never a wait as
     * the server's default user; the caller backs off instead. */
    if (r->type == REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        waker_close(w, i);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

/* Sends BLPOP list on node i's blocking connection without reading the
 * answer; 0 when it went out whole. */
static int pop_send(const dlock_client *c, dlock__waker *w, size_t i, const char *list,
                    int64_t block_ms)
{
    char secs[32];
    const char *argv[3] = {"BLPOP", list, secs};
    int done = 0;

    if (dlock__waker_open(c, w, i) != 0)
        return -1;
    snprintf(secs, sizeof(secs), "%lld.%03lld", (long long)(block_ms / 1000),
             (long long)(block_ms % 1000));
    if (redisSetTimeout(w->ctx[i], dlock__tv_ms(c->command_timeout_ms)) != REDIS_OK ||
        redisAppendCommandArgv(w->ctx[i], 3, argv, NULL) != REDIS_OK) {
        waker_close(w, i);
        return -1;
    }
    while (!done)
        if (redisBufferWrite(w->ctx[i], &done) != REDIS_OK) {
            waker_close(w, i);
            return -1;
        }
    w->pending |= 1u << i;
    return 0;
}

uint32_t dlock__wake_pop_any(const dlock_client *c, dlock__waker *w, uint32_t mask,
                             const char *list, int64_t block_ms,
                             char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN])
{
    int64_t end;
    uint32_t got = 0;

    if (block_ms < 1)
        block_ms = 1;
    end = dlock_now_ms() + block_ms;
    for (size_t i = 0; i < c->n; i++)
        if ((mask & (1u << i)) && !(w->pending & (1u << i)))
            (void)pop_send(c, w, i, list, block_ms);
    while (got == 0) {
        struct pollfd p[DLOCK_MAX_NODES];
        size_t at[DLOCK_MAX_NODES], k = 0;
        int64_t left = end - dlock_now_ms();

        for (size_t i = 0; i < c->n; i++)
            if ((mask & w->pending & (1u << i)) && w->ctx[i] != NULL) {
                p[k].fd = w->ctx[i]->fd;
                p[k].events = POLLIN;
                p[k].revents = 0;
                at[k++] = i;
            }
        if (k == 0 || left <= 0 || poll(p, (nfds_t)k, (int)left) <= 0)
            break;
        for (size_t j = 0; j < k; j++) {
            size_t i = at[j];
            void *rv = NULL;
            redisReply *r;
            int timed_out;

            if (p[j].revents == 0)
                continue;
            if (redisBufferRead(w->ctx[i]) != REDIS_OK ||
                redisGetReplyFromReader(w->ctx[i], &rv) != REDIS_OK) {
                waker_close(w, i);
                continue;
            }
            if (rv == NULL)
                continue; /* part of the reply only */
            w->pending &= ~(1u << i);
            r = rv;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                r->element[1]->type == REDIS_REPLY_STRING &&
                r->element[1]->len < DLOCK__RQ_MSG_LEN) {
                memcpy(msgs[i], r->element[1]->str, r->element[1]->len);
                msgs[i][r->element[1]->len] = '\0';
                got |= 1u << i;
            }
            timed_out = r->type == REDIS_REPLY_NIL;
            if (dlock__sentinel_demoted(&c->nodes[i].addr, r))
                waker_close(w, i);
            freeReplyObject(r);
            /* A BLPOP that an earlier, shorter wait sent timed out: this
             * wait listens there again until its own end. Otherwise a key
             * handed to us there would go unheard until then. (An error
             * reply is not retried here: it would come straight back.) */
            if (timed_out && w->ctx[i] != NULL && end - dlock_now_ms() > 0)
                (void)pop_send(c, w, i, list, end - dlock_now_ms());
        }
    }
    return got;
}
