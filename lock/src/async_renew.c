/* async_renew.c - automatic renewal on the event-loop client: one loop
 * timer does what the blocking client's watchdog thread does. It follows
 * the same rules (renew.c: when a lock is due, the limits, the validity
 * check, the retry, lost and on_lost) and the same extend steps
 * (protocol.h). One renewal round at a time, as the watchdog's. While it
 * runs the lock is the client's wd_cb_lock. So a dlock_lock_free of it
 * (from the loop: the only thread) is done when the round ends, and a
 * release made meanwhile wins over the round's answer. */
#include "async_internal.h"

#include <pthread.h>

/* Client mutex held: the timer at the earliest due lock. */
static void schedule(dlock_async *a)
{
    dlock_client *c = a->c;
    int64_t next = INT64_MAX, now = dlock_now_ms();

    if (a->renewing)
        return;
    for (dlock_lock *l = c->renew_head; l != NULL; l = l->reg_next) {
        int64_t t = dlock__renew_due_ms(l);

        if (t < next)
            next = t;
    }
    if (next == INT64_MAX)
        a->loop.timer_stop(a->renew_timer);
    else
        a->loop.timer_set(a->renew_timer, next > now ? next - now : 0);
}

/* The lock is the one a renewal runs for: a free from the loop's thread is
 * deferred (renew.c's dlock_lock_free), an unregister waits. */
static void busy(dlock_client *c, dlock_lock *lock)
{
    c->wd_cb_lock = lock;
    c->wd_started = 1;
    c->wd_thread = pthread_self();
}

static void renew_done(dlock__around *r, void *arg)
{
    dlock_async *a = arg;
    dlock_client *c = a->c;
    dlock_lock *lock = a->rlock;
    dlock_err rc = DLOCK_OK;
    int gone;

    pthread_mutex_lock(&c->mu);
    /* Released or freed while the round was out: the release decides, not
     * this round's answer (which may have come after the release's). */
    gone = lock->free_after_cb || lock->release_sent || atomic_load(&lock->state) != DLOCK__HELD;
    if (!gone) {
        rc = dlock__extend_decide(c, lock, &a->rx, r->res, c->wd_errstr);
        if (rc == DLOCK_ERR_LOST && dlock__extend_undo(c, lock, &a->rx))
            dlock__async_send_only(a, a->rx.undo_mask, a->rx.undo_id, a->rx.undo_keys,
                                   a->rx.undo_nkeys, a->rx.undo_args, a->rx.undo_nargs);
    }
    dlock__around_free(r);
    dlock__extend_done(&a->rx);
    a->rround = NULL;
    a->rlock = NULL;
    c->wd_cb_lock = NULL;
    if (gone) {
        int free_it = lock->free_after_cb;

        dlock__renew_unregister_locked(c, lock);
        if (free_it)
            dlock__lock_destroy(lock);
    } else if (dlock__renew_settle(c, lock, rc) != 0) {
        busy(c, lock); /* on_lost runs as on the watchdog: a free inside is deferred */
        dlock__renew_mark_lost(c, lock, rc);
        c->wd_cb_lock = NULL;
    }
    c->wd_started = 0;
    a->renewing = 0;
    schedule(a);
    pthread_mutex_unlock(&c->mu);
}

/* Client mutex held: starts the extension of a due lock. */
static void renew_start(dlock_async *a, dlock_lock *lock)
{
    dlock_client *c = a->c;
    dlock_err rc = dlock__extend_prepare(c, lock, dlock__renew_ttl(lock), &a->rx, c->wd_errstr);

    if (rc == DLOCK_OK) {
        a->rlock = lock;
        a->renewing = 1;
        busy(c, lock);
        a->rround = dlock__around_start(a, dlock__all_nodes(c), 0, a->rx.id, a->rx.keys,
                                        a->rx.nkeys, a->rx.args, 2, dlock__quorum_of_ones,
                                        &c->quorum, INT64_MAX, renew_done, a);
        if (a->rround != NULL)
            return;
        a->renewing = 0;
        a->rlock = NULL;
        c->wd_cb_lock = NULL;
        c->wd_started = 0;
        dlock__errf(c->wd_errstr, "renew \"%s\": out of memory for the round", lock->resource);
        rc = DLOCK_ERR_NOMEM;
    }
    dlock__extend_done(&a->rx);
    if (dlock__renew_settle(c, lock, rc) != 0) {
        busy(c, lock);
        dlock__renew_mark_lost(c, lock, rc);
        c->wd_cb_lock = NULL;
        c->wd_started = 0;
    }
}

static void on_renew_timer(void *arg)
{
    dlock_async *a = arg;
    dlock_client *c = a->c;

    dlock__async_enter(a);
    pthread_mutex_lock(&c->mu);
    /* Every lock due now, as the watchdog's loop; an extension ends the
     * pass (one round at a time) and the round's end schedules again. */
    for (int guard = 0; guard < 4096 && !a->renewing; guard++) {
        int64_t now = dlock_now_ms();
        dlock_lock *due = NULL;

        for (dlock_lock *l = c->renew_head; l != NULL && due == NULL; l = l->reg_next)
            if (dlock__renew_due_ms(l) <= now)
                due = l;
        if (due == NULL)
            break;
        switch (dlock__renew_next(c, due, now)) {
        case DLOCK__RENEW_STOP:
            dlock__renew_unregister_locked(c, due);
            break;
        case DLOCK__RENEW_LOST:
            busy(c, due);
            dlock__renew_mark_lost(c, due, DLOCK_ERR_LOST);
            c->wd_cb_lock = NULL;
            c->wd_started = 0;
            break;
        case DLOCK__RENEW_EXTEND:
            renew_start(a, due);
            break;
        }
    }
    schedule(a);
    pthread_mutex_unlock(&c->mu);
    dlock__async_leave(a);
}

int dlock__async_renew_init(dlock_async *a)
{
    a->renew_timer = a->loop.timer_new(a->loop.loop, on_renew_timer, a);
    return a->renew_timer != NULL ? 0 : -1;
}

void dlock__async_renew_free(dlock_async *a)
{
    dlock_client *c = a->c;

    pthread_mutex_lock(&c->mu);
    if (a->renewing) {
        dlock_lock *lock = a->rlock;
        int free_it = lock->free_after_cb;

        dlock__around_free(a->rround);
        dlock__extend_done(&a->rx);
        a->rround = NULL;
        a->rlock = NULL;
        a->renewing = 0;
        c->wd_cb_lock = NULL;
        dlock__renew_unregister_locked(c, lock);
        if (free_it)
            dlock__lock_destroy(lock);
    }
    /* Never a thread here: dlock_client_free must not join one. */
    c->wd_started = 0;
    pthread_mutex_unlock(&c->mu);
    if (a->renew_timer != NULL)
        a->loop.timer_free(a->renew_timer);
    a->renew_timer = NULL;
}

dlock_err dlock_async_auto_renew(dlock_async *a, dlock_lock *lock,
                                 const dlock_renew_options *ropts)
{
    dlock_err rc;

    if (a == NULL)
        return DLOCK_ERR_ARG;
    pthread_mutex_lock(&a->c->mu);
    a->c->errstr[0] = '\0';
    rc = dlock__renew_register(a->c, lock, ropts);
    if (rc == DLOCK_OK)
        schedule(a);
    pthread_mutex_unlock(&a->c->mu);
    return rc;
}
