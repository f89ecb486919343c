/* renew.c - automatic renewal: one watchdog thread per client extends every
 * registered lock at about a third of its TTL. */
#include "dlock_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* Client mutex held. No-op when the lock is not registered with c. */
void dlock__renew_unregister_locked(dlock_client *c, dlock_lock *lock)
{
    dlock_lock **pp;

    if (atomic_load(&lock->reg_client) != c)
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

static uint32_t renew_ttl(const dlock_lock *lock)
{
    return lock->ropts.ttl_ms != 0 ? lock->ropts.ttl_ms : lock->ttl_ms;
}

/* At a third of the TTL set by the last acquire/extend: two thirds of the
 * validity remain as margin for a watchdog delayed behind other rounds on
 * the mutex and for the renewal round itself. A failed renewal is not
 * retried (renew_one reports it lost at once), so the margin is for delay,
 * not for second attempts. At least 1 ms after the last renewal, so a TTL
 * under 3 ms cannot make the watchdog renew back to back with the mutex held. */
static int64_t due_ms(const dlock_lock *lock)
{
    int64_t third = lock->cur_ttl_ms / 3;

    return lock->renew_base_ms + (third > 0 ? third : 1);
}

static void mark_lost(dlock_client *c, dlock_lock *lock, dlock_err why)
{
    dlock_lost_fn fn = lock->ropts.on_lost;
    void *user = lock->ropts.user;

    atomic_store(&lock->state, DLOCK__LOST);
    dlock__renew_unregister_locked(c, lock);
    /* Called once: the lock left the registry above, so no later pass can
     * report it again. The client mutex is held (documented in dlock.h). */
    if (fn != NULL)
        fn(lock, why, user);
}

/* One renewal of a due lock; client mutex held. */
static void renew_one(dlock_client *c, dlock_lock *lock, int64_t now)
{
    dlock_err rc;

    if ((lock->ropts.max_renewals != 0 &&
         atomic_load(&lock->renewals) >= lock->ropts.max_renewals) ||
        (lock->ropts.max_lease_ms != 0 && now - lock->acquired_ms >= lock->ropts.max_lease_ms)) {
        /* Limits reached: stop renewing and let the lease run out on its
         * own; dlock_is_held() turns 0 when the validity ends. A hung
         * holder thus cannot keep a resource forever. */
        dlock__renew_unregister_locked(c, lock);
        return;
    }
    if (now >= atomic_load(&lock->valid_until_ms)) {
        /* Too late: the keys may already have expired and been taken by
         * someone else. Extending now could prolong their lock's lifetime
         * on no node (the script checks the token) but could also
         * resurrect ours after a gap in which another client held it. */
        dlock__errf(c->wd_errstr, "renew \"%s\": validity ran out before renewal",
                    lock->resource);
        c->stats.lost++;
        mark_lost(c, lock, DLOCK_ERR_LOST);
        return;
    }
    rc = dlock__extend_locked(c, lock, renew_ttl(lock), c->wd_errstr);
    if (rc == DLOCK_OK) {
        atomic_fetch_add(&lock->renewals, 1);
        return;
    }
    /* A failed renewal (lost, or too few nodes answered) means we can no
     * longer prove ownership beyond the current validity: report it now
     * rather than let the holder run on into an unprotected window. */
    mark_lost(c, lock, rc);
}

static void *watchdog_main(void *arg)
{
    dlock_client *c = arg;

    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        int64_t now = dlock_now_ms(), next = INT64_MAX;
        dlock_lock *due = NULL;

        for (dlock_lock *l = c->renew_head; l != NULL; l = l->reg_next) {
            int64_t t = due_ms(l);
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
            ts.tv_sec = (time_t)(next / 1000);
            ts.tv_nsec = (long)(next % 1000) * 1000000L;
            /* A condition-variable sleep, not nanosleep: stop and new
             * registrations wake the thread at once. */
            pthread_cond_timedwait(&c->wd_cond, &c->mu, &ts);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

dlock_err dlock_auto_renew(dlock_client *c, dlock_lock *lock, const dlock_renew_options *ropts)
{
    static const dlock_renew_options defaults = {0, 0, 0, NULL, NULL};
    dlock_err rc = DLOCK_ERR_ARG;
    dlock_client *owner;

    if (c == NULL)
        return DLOCK_ERR_ARG;
    pthread_mutex_lock(&c->mu);
    if (lock == NULL) {
        dlock__errf(c->errstr, "auto_renew: lock is NULL");
        goto out;
    }
    owner = atomic_load(&lock->reg_client);
    if (owner != NULL && owner != c) {
        dlock__errf(c->errstr, "auto_renew: lock is auto-renewed by another client");
        goto out;
    }
    if (atomic_load(&lock->state) != DLOCK__HELD) {
        dlock__errf(c->errstr, "auto_renew \"%s\": lock was already released or lost",
                    lock->resource);
        rc = DLOCK_ERR_LOST;
        goto out;
    }
    lock->ropts = ropts != NULL ? *ropts : defaults;
    if (owner == NULL) {
        lock->reg_next = c->renew_head;
        c->renew_head = lock;
        atomic_store(&lock->reg_client, c);
    }
    if (!c->wd_started) {
        int err = pthread_create(&c->wd_thread, NULL, watchdog_main, c);
        if (err != 0) {
            dlock__renew_unregister_locked(c, lock);
            char ebuf[64];
            dlock__errf(c->errstr, "auto_renew: cannot start the watchdog thread: %s",
                        dlock__strerror(err, ebuf, sizeof(ebuf)));
            rc = DLOCK_ERR_NOMEM;
            goto out;
        }
        c->wd_started = 1;
    }
    pthread_cond_signal(&c->wd_cond);
    rc = DLOCK_OK;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
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
