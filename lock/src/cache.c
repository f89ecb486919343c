/* cache.c - lock caching: a lock kept after its section (dlock_keep) and
 * taken up again for the next one (dlock_reuse) with no round, until
 * another client wants it. Every failed acquire (acquire.lua, enter.lua,
 * multi_acquire.lua, acquire_each.lua) publishes the holder's token on the
 * lock key's channel. A listener thread per node, subscribed there, hears
 * it and hands the kept lock over (pass.lua), or marks a lock in use as
 * wanted, which its dlock_keep then releases. The watchdog renews kept locks and gives up
 * idle ones. docs/libdlock.md, "Lock caching". */
#include "dlock_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reconnect delays of a subscriber connection that failed: doubling from
 * the base to the ceiling, as the round connections' probes (breaker.c). */
#define CACHE_RETRY_BASE_MS 100
#define CACHE_RETRY_MAX_MS 2000

static void unlink_kept(dlock_client *c, dlock_lock *lock)
{
    for (dlock_lock **pp = &c->cache_head; *pp != NULL; pp = &(*pp)->cache_next) {
        if (*pp == lock) {
            *pp = lock->cache_next;
            break;
        }
    }
    lock->cache_next = NULL;
    lock->cached = 0;
}

/* Releases a lock the client took over (handed to the first waiter by
 * pass.lua) and frees it; the mutex is held on entry and on return, and let
 * go around the free (dlock_lock_free takes it). */
static dlock_err give_up(dlock_client *c, dlock_lock *lock, char *errbuf)
{
    dlock_err rc = DLOCK_ERR_LOST;

    if (atomic_load(&lock->state) == DLOCK__HELD && !lock->release_sent)
        rc = dlock__release_locked(c, lock, errbuf);
    c->stats.cache_given_up++;
    pthread_mutex_unlock(&c->mu);
    dlock_lock_free(lock);
    pthread_mutex_lock(&c->mu);
    return rc;
}

/* A notice for a token none of our locks held: kept for a while, since the
 * acquire that set the key may not have read its grant yet (SPIN found the
 * waiter starved without this: docs/model.md). Every caching client hears
 * every notice of its prefix, so the ring is large. */
static void remember_unmatched(dlock_client *c, const char *token)
{
    snprintf(c->cache_unmatched[c->cache_unmatched_next], DLOCK_TOKEN_LEN, "%s", token);
    c->cache_unmatched_next = (c->cache_unmatched_next + 1) % DLOCK__CACHE_UNMATCHED;
}

static int was_unmatched(const dlock_client *c, const char *token)
{
    for (size_t i = 0; i < DLOCK__CACHE_UNMATCHED; i++)
        if (strcmp(c->cache_unmatched[i], token) == 0)
            return 1;
    return 0;
}

/* A kept lock leaves the cache and goes to the first waiter (pass.lua);
 * the mutex is let go around its free, as give_up's. */
static void give_up_kept(dlock_client *c, dlock_lock *l)
{
    unlink_kept(c, l);
    (void)give_up(c, l, c->cache_errstr);
}

/* Another client failed to take the key that holds token: a kept lock
 * is given up at once, a lock in use at its dlock_keep. Mutex held. */
static void cache_noticed(dlock_client *c, const char *token)
{
    for (dlock_lock *l = c->cache_head; l != NULL; l = l->cache_next) {
        if (strcmp(l->token, token) == 0) {
            give_up_kept(c, l); /* to the waiter that asked */
            return;
        }
    }
    for (dlock_lock *l = c->held_head; l != NULL; l = l->held_next) {
        if (strcmp(l->token, token) == 0) {
            l->wanted = 1;
            return;
        }
    }
    remember_unmatched(c, token);
}

int64_t dlock__cache_idle_expired(dlock_client *c, int64_t now)
{
    int64_t next = INT64_MAX;

    for (dlock_lock *l = c->cache_head; l != NULL;) {
        dlock_lock *after = l->cache_next;

        if (now >= l->cache_idle_until_ms || atomic_load(&l->state) != DLOCK__HELD) {
            give_up_kept(c, l);
            /* The list may have changed while the mutex was let go. */
            after = c->cache_head;
        } else if (l->cache_idle_until_ms < next) {
            next = l->cache_idle_until_ms;
        }
        l = after;
    }
    return next;
}

/* The pattern of every lock key of the client's prefix, glob characters of
 * the prefix escaped. */
static void lock_pattern(const dlock_client *c, char *out, size_t len)
{
    size_t o = 0;

    for (const char *p = c->prefix; *p != '\0' && o + 2 < len; p++) {
        if (strchr("*?[]\\", *p) != NULL)
            out[o++] = '\\';
        out[o++] = *p;
    }
    snprintf(out + o, len - o, "%s*", DLOCK_LOCK_NS);
}

static void sub_close(dlock__waker *sub, size_t i)
{
    if (sub->ctx[i] != NULL)
        redisFree(sub->ctx[i]);
    sub->ctx[i] = NULL;
}

/* Connects node i's subscriber and subscribes it: 0 when listening. */
static int subscribe(dlock_client *c, dlock__waker *sub, size_t i, const char *pattern)
{
    const char *argv[2] = {"PSUBSCRIBE", pattern};
    redisReply *r;
    int ok;

    if (dlock__waker_open(c, sub, i) != 0)
        return -1;
    if (redisSetTimeout(sub->ctx[i], dlock__tv_ms(c->command_timeout_ms)) != REDIS_OK) {
        sub_close(sub, i);
        return -1;
    }
    r = redisCommandArgv(sub->ctx[i], 2, argv, NULL);
    ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
    if (r != NULL)
        freeReplyObject(r);
    if (!ok)
        sub_close(sub, i);
    return ok ? 0 : -1;
}

/* Reads what node i sent: each notice handled. -1 when the connection
 * broke (closed: notices are missed until it is back). */
static int read_notices(dlock_client *c, dlock__waker *sub, size_t i)
{
    void *reply = NULL;

    if (redisBufferRead(sub->ctx[i]) != REDIS_OK) {
        sub_close(sub, i);
        return -1;
    }
    for (;;) {
        if (redisGetReplyFromReader(sub->ctx[i], &reply) != REDIS_OK) {
            sub_close(sub, i);
            return -1;
        }
        if (reply == NULL)
            return 0;
        redisReply *r = reply;
        /* pmessage, pattern, channel (the lock key), the holder's token. */
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
            r->element[3]->type == REDIS_REPLY_STRING &&
            r->element[3]->len == DLOCK_TOKEN_LEN - 1) {
            pthread_mutex_lock(&c->mu);
            cache_noticed(c, r->element[3]->str);
            pthread_mutex_unlock(&c->mu);
        }
        freeReplyObject(reply);
    }
}

/* Whether dlock__cache_stop was called; waits up to ms for it (the stop
 * pipe is written once and never drained). */
static int stopping(dlock_client *c, int64_t ms)
{
    struct pollfd p = {.fd = c->cache_pipe[0], .events = POLLIN};
    int stop;

    if (ms > 0)
        (void)poll(&p, 1, (int)ms);
    pthread_mutex_lock(&c->mu);
    stop = c->cache_stop;
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static void set_listening(dlock_client *c, size_t i, int on)
{
    pthread_mutex_lock(&c->mu);
    if (on)
        c->cache_listening |= 1u << i;
    else
        c->cache_listening &= ~(1u << i);
    pthread_mutex_unlock(&c->mu);
}

/* One node's listener: its own thread, so that a node slow to connect
 * delays no other node's notices. */
static void *listener_main(void *arg)
{
    dlock__cache_listener *me = arg;
    dlock_client *c = me->c;
    size_t i = me->node;
    dlock__waker sub;
    char pattern[DLOCK_MAX_KEY_LEN * 2 + 16];
    int64_t backoff = 0;

    memset(&sub, 0, sizeof(sub));
    lock_pattern(c, pattern, sizeof(pattern));
    while (!stopping(c, backoff)) {
        if (subscribe(c, &sub, i, pattern) != 0) {
            backoff = backoff == 0 ? CACHE_RETRY_BASE_MS
                      : backoff * 2 > CACHE_RETRY_MAX_MS ? CACHE_RETRY_MAX_MS : backoff * 2;
            continue;
        }
        backoff = 0;
        set_listening(c, i, 1);
        for (;;) {
            struct pollfd p[2] = {{.fd = sub.ctx[i]->fd, .events = POLLIN},
                                  {.fd = c->cache_pipe[0], .events = POLLIN}};

            if (poll(p, 2, -1) < 0 && errno != EINTR)
                break;
            if (p[1].revents != 0 && stopping(c, 0))
                break;
            if (p[0].revents != 0 && read_notices(c, &sub, i) != 0)
                break;
        }
        /* Broken or stopping: notices from this node are missed until it
         * listens again (a waiter's next attempt publishes again). */
        set_listening(c, i, 0);
        sub_close(&sub, i);
        backoff = CACHE_RETRY_BASE_MS;
    }
    sub_close(&sub, i);
    return NULL;
}

int dlock__cache_start(dlock_client *c, char *why, size_t whylen)
{
    if (!c->cache_on)
        return 0;
    if (pipe(c->cache_pipe) != 0 || fcntl(c->cache_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(c->cache_pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(c->cache_pipe[1], F_SETFD, FD_CLOEXEC) != 0) {
        snprintf(why, whylen, "cache_locks: cannot make the listeners' pipe: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < c->n; i++) {
        dlock__cache_listener *l = &c->cache_listeners[i];
        int err;

        l->c = c;
        l->node = i;
        err = pthread_create(&l->thread, NULL, listener_main, l);
        if (err != 0) {
            snprintf(why, whylen, "cache_locks: cannot start a listener thread: %s", strerror(err));
            return -1;
        }
        l->started = 1;
    }
    return 0;
}

void dlock__cache_stop(dlock_client *c)
{
    char b = 1;

    if (!c->cache_on)
        return;
    pthread_mutex_lock(&c->mu);
    c->cache_stop = 1;
    pthread_mutex_unlock(&c->mu);
    if (c->cache_pipe[1] >= 0 && write(c->cache_pipe[1], &b, 1) != 1) {
        /* Without the byte a listener blocked in poll would never see the
         * stop: closing the write end wakes it too (POLLHUP). */
        close(c->cache_pipe[1]);
        c->cache_pipe[1] = -1;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (c->cache_listeners[i].started)
            pthread_join(c->cache_listeners[i].thread, NULL);
        c->cache_listeners[i].started = 0;
    }
    /* The kept locks are released (handed on), not left to their TTL. */
    pthread_mutex_lock(&c->mu);
    while (c->cache_head != NULL)
        give_up_kept(c, c->cache_head);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < 2; i++)
        if (c->cache_pipe[i] >= 0)
            close(c->cache_pipe[i]);
}

dlock_err dlock_keep(dlock_client *c, dlock_lock *lock, unsigned idle_ms)
{
    const char *why = NULL;
    int64_t now = dlock_now_ms();
    dlock_err rc;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "keep") != 0)
        return DLOCK_ERR_ARG;
    /* Refused, the lock stays the caller's, untouched. */
    if (!c->cache_on)
        why = "the client was made without cache_locks";
    else if (idle_ms == 0)
        why = "idle_ms is 0";
    else if (lock != NULL && lock->multi != NULL)
        why = "a multi-resource lock is not kept";
    if (why != NULL || dlock__release_ready(c, lock, "keep", c->errstr) != 0) {
        if (why != NULL)
            dlock__errf(c->errstr, "keep: %s", why);
        pthread_mutex_unlock(&c->mu);
        return DLOCK_ERR_ARG;
    }
    if (lock->wanted || was_unmatched(c, lock->token))
        why = "another client asked for it";
    else if (dlock__popcount(c->cache_listening) < c->quorum)
        why = "its notices are heard from less than a quorum of nodes";
    else if (atomic_load(&lock->state) != DLOCK__HELD || atomic_load(&lock->valid_until_ms) <= now)
        why = "its validity is over";
    if (why == NULL && atomic_load(&lock->reg_client) == NULL) {
        /* Renewed like any auto-renewed lock, at a third of its TTL. */
        rc = dlock__renew_register(c, lock, NULL);
        if (rc == DLOCK_OK)
            rc = dlock__watchdog_start(c, lock, "keep");
        if (rc != DLOCK_OK)
            why = "it cannot be renewed";
    }
    if (why != NULL) {
        char name[DLOCK_MAX_KEY_LEN + 1];

        snprintf(name, sizeof(name), "%s", lock->resource);
        rc = give_up(c, lock, c->errstr);
        if (rc == DLOCK_OK)
            dlock__errf(c->errstr, "keep \"%s\": released instead: %s", name, why);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    lock->cached = 1;
    lock->cache_idle_until_ms = now + idle_ms;
    lock->cache_next = c->cache_head;
    c->cache_head = lock;
    /* The watchdog gives it up when idle: it sleeps until the next such time. */
    pthread_cond_signal(&c->wd_cond);
    pthread_mutex_unlock(&c->mu);
    return DLOCK_OK;
}

dlock_lock *dlock_reuse(dlock_client *c, const char *resource, unsigned min_left_ms)
{
    dlock_lock *lock;
    const char *why = NULL;
    int64_t left;

    if (c == NULL)
        return NULL;
    if (dlock__enter(c, "reuse") != 0)
        return NULL;
    for (lock = c->cache_head; lock != NULL; lock = lock->cache_next)
        if (resource != NULL && strcmp(lock->resource, resource) == 0)
            break;
    if (lock == NULL) {
        dlock__errf(c->errstr, "reuse \"%s\": no kept lock", resource != NULL ? resource : "(null)");
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    unlink_kept(c, lock);
    left = atomic_load(&lock->valid_until_ms) - dlock_now_ms();
    /* Never a wanted one: a notice hands a kept lock over at once, and
     * dlock_keep keeps no lock asked for during its section. */
    if (atomic_load(&lock->state) != DLOCK__HELD)
        why = "it was lost";
    /* Never used past its validity: a section starts only with enough
     * lease left to finish inside it. */
    else if (left < (int64_t)min_left_ms)
        why = "too little of its validity is left";
    if (why != NULL) {
        char gone[DLOCK_ERRSTR_LEN];

        (void)give_up(c, lock, gone);
        dlock__errf(c->errstr, "reuse \"%s\": released: %s (%lld ms left, %u wanted)", resource, why,
                    (long long)left, min_left_ms);
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    lock->owner = pthread_self();
    c->stats.cache_reused++;
    pthread_mutex_unlock(&c->mu);
    return lock;
}
