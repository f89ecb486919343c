/* wake.c - wake on release: instead of polling with backoff, a waiter
 * blocks in BLPOP on the lock's wake list until the holder's release
 * pushes a hand-off nonce to it (see script.c for the scripts and
 * docs/single-instance.md for the algorithm).
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

/* A BLPOP of an earlier acquisition may still owe its reply on node i:
 * read it if it came (a message for an old token: that acquisition's
 * release or leave.lua dealt with the key), else close the connection,
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

/* Opens node i's blocking connection if needed (connect bounded by
 * connect_timeout_ms; hiredis connects non-blocking and polls), with AUTH.
 * 0 when usable. */
static int ensure(const dlock_client *c, dlock__waker *w, size_t i)
{
    const dlock__addr *a = &c->nodes[i].addr;
    struct timeval tv = dlock__tv_ms(c->connect_timeout_ms);
    redisReply *r;

    settle(w, i);
    if (w->ctx[i] != NULL)
        return 0;
    if (a->is_sentinel) {
        dlock__hostport m;
        char why[DLOCK__DETAIL_LEN];

        /* The waiter's own connection follows the sentinels like the
         * rounds' one (sentinel.c; immutable fields only, no mutex). */
        if (dlock__sentinel_master(c, a, &m, why) != 0)
            return -1;
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
    {
        const char *argv[3];
        int argc = dlock__auth_argv(c, argv);

        if (argc == 0)
            return 0;
        r = call(w, i, c->command_timeout_ms, argc, argv);
    }
    if (r == NULL)
        return -1;
    /* As on the round connections (conn.c): a password the server does not
     * have refuses nothing, so the waiter may block here all the same. */
    if (r->type == REDIS_REPLY_ERROR && !dlock__auth_not_needed(r)) {
        freeReplyObject(r);
        waker_close(w, i);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

/* wait.lua on node i: the lock key's PTTL (> 0 held, <= 0 free or without
 * expiry), listing waiter id as waiting for at most limit_ms. -3 when the
 * node failed. */
static long long wait_script(const dlock_client *c, dlock__waker *w, size_t i, const char *key,
                             const char *waiters, const char *id, int64_t limit_ms)
{
    const dlock__script *s = &c->scripts[DLOCK__SCRIPT_WAIT];
    char ms[24], handoff[24];
    const char *argv[8] = {"EVALSHA", s->sha, "2", key, waiters, id, ms, handoff};
    redisReply *r;
    long long left = -3;

    snprintf(ms, sizeof(ms), "%lld", (long long)limit_ms);
    snprintf(handoff, sizeof(handoff), "%d", c->handoff_ms);
    r = call(w, i, c->command_timeout_ms, 8, argv);
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* Not cached on this node yet: the script did not run, send it whole. */
        freeReplyObject(r);
        argv[0] = "EVAL";
        argv[1] = s->body;
        r = call(w, i, c->command_timeout_ms, 8, argv);
    }
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        left = r->integer;
    /* Sent to a master that was demoted since: ask the sentinels next time. */
    if (r != NULL && dlock__sentinel_demoted(&c->nodes[i].addr, r))
        waker_close(w, i);
    if (r != NULL)
        freeReplyObject(r);
    return left;
}

/* Blocks until a release wakes us (id: this dlock_acquire call's waiter
 * name, the same across its waits so it is listed once; skip: nodes whose
 * circuit breaker is open, not asked, so a paused minority does not cost
 * every wait a command timeout), the holder's TTL runs out or the
 * deadline comes; no client mutex held (reads only immutable fields).
 * Returns 1 woken (nonce = the hand-off nonce, "" if none), 0 the wait
 * timed out (the holder's key should have expired: try again now), -1 no
 * wait was possible (the key is already free, or no node's blocking
 * connection works): the caller falls back to its backoff sleep. */
int dlock__wake_wait(const dlock_client *c, dlock__waker *w, uint32_t skip, const char *resource,
                     const char *id, int64_t deadline_ms, char nonce[DLOCK__NONCE_LEN])
{
    char lkey[DLOCK__KEY_BUF], list[DLOCK__KEY_BUF + 16], waiters[DLOCK__KEY_BUF + 16];
    char secs[32];
    const char *argv[3] = {"BLPOP", list, secs};
    int64_t now = dlock_now_ms();
    int64_t limit = deadline_ms - now;
    int rc = -1;

    nonce[0] = '\0';
    if (limit <= 0 || dlock__lock_key(c, resource, lkey, sizeof(lkey)) != 0 ||
        dlock__wake_key(c, DLOCK_WAKE_NS, resource, list, sizeof(list)) != 0 ||
        dlock__wake_key(c, DLOCK_WAITERS_NS, resource, waiters, sizeof(waiters)) != 0)
        return -1;
    size_t on = c->n;
    long long left = 0;
    int64_t block_ms;
    redisReply *r;

    /* Listed on every node, because every node's release must see the
     * waiter to reserve its key: a release that deletes the key on a
     * majority lets a newcomer barge in. One node at a time, each bounded
     * by the command timeout. */
    for (size_t i = 0; i < c->n; i++) {
        long long l;

        if ((skip & (1u << i)) || ensure(c, w, i) != 0)
            continue;
        l = wait_script(c, w, i, lkey, waiters, id, limit);
        if (l > 0 && on == c->n) {
            on = i;
            left = l;
        }
    }
    /* Nowhere held (released since our attempt, or no expiry: never block
     * on it), or no node reachable: poll. */
    if (on == c->n)
        return -1;
    /* Every waiter blocks on the lowest-numbered node where it found the
     * key, so with Redlock all waiters normally share one queue; releases
     * push to every node. Never longer than the holder's key can live: if
     * it dies without releasing, no wake comes and the expiry is our cue. */
    block_ms = left < limit ? left : limit;
    if (block_ms < 1)
        block_ms = 1;
    snprintf(secs, sizeof(secs), "%lld.%03lld", (long long)(block_ms / 1000),
             (long long)(block_ms % 1000));
    r = call(w, on, block_ms + c->command_timeout_ms, 3, argv);
    if (r == NULL)
        return -1; /* broken (closed; reopened next time): poll */
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len < DLOCK__NONCE_LEN) {
        memcpy(nonce, r->element[1]->str, r->element[1]->len);
        nonce[r->element[1]->len] = '\0';
        rc = 1;
    } else if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
        rc = 0;
    }
    /* else an error (WRONGTYPE on a foreign key of that name): rc -1, poll. */
    freeReplyObject(r);
    return rc;
}

/* One node, direct hand-off (queue.c): blocks on node 0 in BLPOP of the
 * waiter's own list for at most block_ms; no client mutex held. Returns 1
 * with the pushed "<fence>:<ms listed>" in msg, 0 the wait timed out, -1
 * the connection failed (closed; reopened next time) or the reply was not
 * ours to read. */
int dlock__wake_pop(const dlock_client *c, dlock__waker *w, const char *list, int64_t block_ms,
                    char *msg, size_t msglen)
{
    char secs[32];
    const char *argv[3] = {"BLPOP", list, secs};
    redisReply *r;
    int rc = -1;

    msg[0] = '\0';
    if (block_ms < 1)
        block_ms = 1;
    if (ensure(c, w, 0) != 0)
        return -1;
    snprintf(secs, sizeof(secs), "%lld.%03lld", (long long)(block_ms / 1000),
             (long long)(block_ms % 1000));
    r = call(w, 0, block_ms + c->command_timeout_ms, 3, argv);
    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len < msglen) {
        memcpy(msg, r->element[1]->str, r->element[1]->len);
        msg[r->element[1]->len] = '\0';
        rc = 1;
    } else if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
        rc = 0;
    }
    /* Blocked on a master that was demoted since: ask the sentinels next time. */
    if (dlock__sentinel_demoted(&c->nodes[0].addr, r))
        waker_close(w, 0);
    freeReplyObject(r);
    return rc;
}

/* Sends BLPOP list on node i's blocking connection without reading the
 * answer; 0 when it went out whole. */
static int pop_send(const dlock_client *c, dlock__waker *w, size_t i, const char *list,
                    int64_t block_ms)
{
    char secs[32];
    const char *argv[3] = {"BLPOP", list, secs};
    int done = 0;

    if (ensure(c, w, i) != 0)
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
            if (dlock__sentinel_demoted(&c->nodes[i].addr, r))
                waker_close(w, i);
            freeReplyObject(r);
        }
    }
    return got;
}
