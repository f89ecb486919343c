/* renew.c - automatic renewal: one watchdog thread per client extends every
 * registered lock at about a third of its TTL; and dlock_lock_free, which
 * takes a lock off the watchdog (waiting for its on_lost to return) before
 * its memory goes. */
#include "dlock_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Client mutex held. No-op when the lock is not registered with c, and
 * while its on_lost runs: the watchdog unregisters it when the callback
 * returns. Until then the registration is what lets dlock_lock_free find
 * the client and wait. (A release from the callback or from the holder's
 * thread would otherwise let a free go ahead under the callback.) */
void dlock__renew_unregister_locked(dlock_client *c, dlock_lock *lock)
{
    dlock_lock **pp;

    if (atomic_load(&lock->reg_client) != c || c->wd_cb_lock == lock)
        return;
    for (pp = &c->renew_head; *pp != NULL; pp = &(*pp)->reg_next) {
        if (*pp == lock) {
            *pp = lock->reg_next;
            break;
        }
    }
    lock->reg_next = NULL;
    atomic_store(&lock->reg_client, NULL);
}

void dlock_lock_free(dlock_lock *lock)
{
    dlock_client *c;

    if (lock == NULL)
        return;
    /* Unregister before freeing, under the client mutex: the watchdog only
     * touches registered locks and only with that mutex, so it can never
     * renew freed memory. A lock stays registered while its on_lost runs
     * (without the mutex). So this finds the client and waits for the
     * callback to return: the holder that saw dlock_is_held() turn 0 and
     * frees at once must not free the lock under the callback's feet. */
    /* The client that lists it (not yet released) or renews it; the same
     * one when both. None in a child of fork(): the parent's mutex may
     * have been copied locked, and the child's copy of the client never
     * renews (dlock__enter). */
    c = atomic_load(&lock->held_in);
    if (c == NULL)
        c = atomic_load(&lock->reg_client);
    if (c != NULL && dlock__forked(c))
        c = NULL;
    if (c != NULL) {
        pthread_mutex_lock(&c->mu);
        dlock__held_remove(c, lock);
        if (c->wd_cb_lock == lock && c->wd_started &&
            pthread_equal(pthread_self(), c->wd_thread)) {
            /* Freed from inside its own callback: waiting would wait for
             * ourselves. The watchdog frees it once the callback returns. */
            lock->free_after_cb = 1;
            pthread_mutex_unlock(&c->mu);
            return;
        }
        while (c->wd_cb_lock == lock)
            pthread_cond_wait(&c->cb_cond, &c->mu);
        dlock__renew_unregister_locked(c, lock);
        pthread_mutex_unlock(&c->mu);
    }
    dlock__lock_destroy(lock);
}

static uint32_t renew_ttl(const dlock_lock *lock)
{
    return lock->ropts.ttl_ms != 0 ? lock->ropts.ttl_ms : lock->ttl_ms;
}

/* At a third of the TTL set by the last acquire/extend: two thirds of the
 * validity remain as margin. That margin covers a watchdog delayed behind
 * other rounds on the mutex, the renewal round itself, and the retries of
 * a round that too few nodes answered (a node restarting, a network
 * blip). At least 1 ms after the last renewal, so a TTL under 3 ms cannot
 * make the watchdog renew back to back with the mutex held. */
int64_t dlock__renew_due_ms(const dlock_lock *lock)
{
    int64_t third = lock->cur_ttl_ms / 3;

    if (lock->renew_retry_ms != 0)
        return lock->renew_retry_ms;
    return lock->renew_base_ms + (third > 0 ? third : 1);
}

/* Pause between renewal attempts after one that too few nodes answered: a
 * tenth of the TTL, at most one command timeout, at least 1 ms, so the
 * watchdog does not hold the mutex back to back. */
static int64_t retry_gap_ms(const dlock_client *c, const dlock_lock *lock)
{
    int64_t gap = lock->cur_ttl_ms / 10;

    if (gap > c->command_timeout_ms)
        gap = c->command_timeout_ms;
    return gap > 0 ? gap : 1;
}

/* Marks the lock lost and calls on_lost once, without the mutex (so the
 * callback may use the client). The lock is kept alive meanwhile: it stays
 * registered with wd_cb_lock naming it. So dlock_lock_free waits for the
 * callback and dlock__renew_unregister_locked leaves it be. Client mutex
 * held on entry and on return. */
void dlock__renew_mark_lost(dlock_client *c, dlock_lock *lock, dlock_err why)
{
    dlock_lost_fn fn = lock->ropts.on_lost;
    void *user = lock->ropts.user;

    /* Written before the state: whoever sees LOST (on_lost, dlock_is_held
     * turning 0) reads the whole detail (dlock_lock_lost_detail). */
    snprintf(lock->lost_detail, sizeof(lock->lost_detail), "%s", c->wd_errstr);
    atomic_store(&lock->state, DLOCK__LOST);
    if (fn != NULL) {
        c->wd_cb_lock = lock;
        pthread_mutex_unlock(&c->mu);
        fn(lock, why, user);
        pthread_mutex_lock(&c->mu);
        c->wd_cb_lock = NULL;
    }
    /* Read before unregistering: once the lock leaves the registry, a
     * dlock_lock_free on another thread finds no client and frees it at
     * once, without waiting for our mutex. */
    int free_it = lock->free_after_cb;

    /* Called once: the lock leaves the registry here, so no later pass can
     * report it again. */
    dlock__renew_unregister_locked(c, lock);
    if (free_it) {
        dlock__lock_destroy(lock);
    }
    pthread_cond_broadcast(&c->cb_cond);
}

dlock__renew_step dlock__renew_next(dlock_client *c, dlock_lock *lock, int64_t now)
{
    if ((lock->ropts.max_renewals != 0 &&
         atomic_load(&lock->renewals) >= lock->ropts.max_renewals) ||
        (lock->ropts.max_lease_ms != 0 && now - lock->acquired_ms >= lock->ropts.max_lease_ms)) {
        /* Limits reached: stop renewing and let the lease run out on its
         * own; dlock_is_held() turns 0 when the validity ends. A hung
         * holder thus cannot keep a resource forever. */
        return DLOCK__RENEW_STOP;
    }
    if (now >= atomic_load(&lock->valid_until_ms)) {
        /* Too late: the keys may already have expired and been taken by
         * someone else. Extending now could prolong their lock's lifetime
         * on no node (the script checks the token) but could also
         * resurrect ours after a gap in which another client held it. */
        dlock__errf(c->wd_errstr, "renew \"%s\": validity ran out before renewal",
                    lock->resource);
        c->stats.lost++;
        return DLOCK__RENEW_LOST;
    }
    return DLOCK__RENEW_EXTEND;
}

uint32_t dlock__renew_ttl(const dlock_lock *lock)
{
    return renew_ttl(lock);
}

int dlock__renew_settle(dlock_client *c, dlock_lock *lock, dlock_err rc)
{
    if (rc == DLOCK_OK) {
        lock->renew_retry_ms = 0;
        atomic_fetch_add(&lock->renewals, 1);
        return 0;
    }
    if (dlock_err_is_unavailable(rc) && atomic_load(&lock->state) == DLOCK__HELD) {
        /* Too few nodes answered, but none said the lock is gone: with most
         * of the validity left, one lost round (a node restarting, a
         * paused process) is no reason to give up. Try again while another
         * round can still end before the validity does (now is re-read:
         * this round took time); a round started later could at best
         * confirm the lock after the holder must already have stopped. */
        int64_t next = dlock_now_ms() + retry_gap_ms(c, lock);

        if (next + c->command_timeout_ms < atomic_load(&lock->valid_until_ms)) {
            lock->renew_retry_ms = next;
            return 0;
        }
    }
    /* Gone (not our token on enough nodes), or no retry fits in the
     * validity left: report it now rather than let the holder run on into
     * an unprotected window. */
    return -1;
}

/* One renewal of a due lock; client mutex held. */
static void renew_one(dlock_client *c, dlock_lock *lock, int64_t now)
{
    dlock_err rc;

    switch (dlock__renew_next(c, lock, now)) {
    case DLOCK__RENEW_STOP:
        dlock__renew_unregister_locked(c, lock);
        return;
    case DLOCK__RENEW_LOST:
        dlock__renew_mark_lost(c, lock, DLOCK_ERR_LOST);
        return;
    case DLOCK__RENEW_EXTEND:
        break;
    }
    rc = dlock__extend_locked(c, lock, renew_ttl(lock), c->wd_errstr);
    if (dlock__renew_settle(c, lock, rc) != 0)
        dlock__renew_mark_lost(c, lock, rc);
}

static void *watchdog_main(void *arg)
{
    dlock_client *c = arg;

    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        int64_t now = dlock_now_ms();
        /* Kept locks (cache.c) left idle are given up here too. */
        int64_t next = dlock__cache_idle_expired(c, now);
        dlock_lock *due = NULL;

        for (dlock_lock *l = c->renew_head; l != NULL; l = l->reg_next) {
            int64_t t = dlock__renew_due_ms(l);
            if (t <= now) {
                due = l;
                break;
            }
            if (t < next)
                next = t;
        }
        if (due != NULL) {
            renew_one(c, due, now);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&c->wd_cond, &c->mu);
        } else {
            struct timespec ts;
            dlock__cond_deadline(next, &ts);
            /* A condition-variable sleep, not nanosleep: stop and new
             * registrations wake the thread at once. */
            pthread_cond_timedwait(&c->wd_cond, &c->mu, &ts);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

dlock_err dlock__renew_register(dlock_client *c, dlock_lock *lock,
                                const dlock_renew_options *ropts)
{
    static const dlock_renew_options defaults = {0, 0, 0, NULL, NULL};
    dlock_client *owner;

    if (lock == NULL) {
        dlock__errf(c->errstr, "auto_renew: lock is NULL");
        return DLOCK_ERR_ARG;
    }
    if (dlock__check_owner(c, lock, "auto_renew", c->errstr) != 0)
        return DLOCK_ERR_ARG;
    /* ropts->ttl_ms 0 means the acquire's TTL, checked then. */
    if (ropts != NULL && ropts->ttl_ms != 0 &&
        dlock__ttl_check(ropts->ttl_ms, "auto_renew", c->errstr) != 0)
        return DLOCK_ERR_ARG;
    owner = atomic_load(&lock->reg_client);
    if (atomic_load(&lock->state) != DLOCK__HELD || lock->release_sent) {
        dlock__errf(c->errstr, "auto_renew \"%s\": lock was already released or lost",
                    lock->resource);
        return DLOCK_ERR_LOST;
    }
    lock->ropts = ropts != NULL ? *ropts : defaults;
    lock->renew_retry_ms = 0;
    if (owner == NULL) {
        lock->reg_next = c->renew_head;
        c->renew_head = lock;
        atomic_store(&lock->reg_client, c);
    }
    return DLOCK_OK;
}

dlock_err dlock_auto_renew(dlock_client *c, dlock_lock *lock, const dlock_renew_options *ropts)
{
    dlock_err rc;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__enter(c, "auto_renew") != 0)
        return DLOCK_ERR_ARG;
    rc = dlock__renew_register(c, lock, ropts);
    if (rc == DLOCK_OK)
        rc = dlock__watchdog_start(c, lock, "auto_renew");
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock__watchdog_start(dlock_client *c, dlock_lock *lock, const char *op)
{
    if (!c->wd_started) {
        int err = pthread_create(&c->wd_thread, NULL, watchdog_main, c);
        if (err != 0) {
            char ebuf[64];

            dlock__renew_unregister_locked(c, lock);
            dlock__errf(c->errstr, "%s: cannot start the watchdog thread: %s", op,
                        dlock__strerror(err, ebuf, sizeof(ebuf)));
            return DLOCK_ERR_NOMEM;
        }
        c->wd_started = 1;
    }
    pthread_cond_signal(&c->wd_cond);
    return DLOCK_OK;
}

/* Stops and joins the watchdog and empties the registry; called by
 * dlock_client_free without the mutex held. */
void dlock__watchdog_stop(dlock_client *c)
{
    int started;

    pthread_mutex_lock(&c->mu);
    c->wd_stop = 1;
    pthread_cond_broadcast(&c->wd_cond);
    started = c->wd_started;
    pthread_mutex_unlock(&c->mu);
    if (started)
        pthread_join(c->wd_thread, NULL);
    pthread_mutex_lock(&c->mu);
    /* Handles outlive the client: make dlock_lock_free find no client. */
    while (c->renew_head != NULL)
        dlock__renew_unregister_locked(c, c->renew_head);
    c->wd_started = 0;
    pthread_mutex_unlock(&c->mu);
}
