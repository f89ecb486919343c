/* lock.c - the lock handle: the one place it is made (dlock__lock_grant),
 * its owner check, the freeing of its memory (dlock__lock_destroy) and its
 * accessors. dlock_lock_free, which first takes the handle off the
 * watchdog, is renew.c's. */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dlock_err dlock__lock_grant(const dlock_client *c, const dlock__grant *g, char *errbuf,
                            dlock_lock **out)
{
    int64_t now = dlock_now_ms();
    dlock_lock *lock;

    /* Checked here, after every round of the grant (the fence sync too):
     * a lease that ran out while we waited for a slow node is another
     * client's already, and a handle would let two work at once. */
    if (g->valid_until_ms <= now) {
        dlock__errf(errbuf, "\"%s\": validity used up before the lock was granted (its bound "
                    "passed %lld ms ago; ttl %u ms)", g->resource,
                    (long long)(now - g->valid_until_ms), g->ttl_ms);
        return DLOCK_ERR_EXPIRED;
    }
    lock = calloc(1, sizeof(*lock));
    if (lock == NULL || (lock->resource = strdup(g->resource)) == NULL) {
        free(lock);
        dlock__errf(errbuf, "out of memory for the lock handle");
        return DLOCK_ERR_NOMEM;
    }
    snprintf(lock->token, sizeof(lock->token), "%s", g->token);
    lock->fence = g->fence;
    lock->may_hold = g->may_hold;
    lock->client_id = c->id;
    lock->ttl_ms = g->ttl_ms;
    lock->cur_ttl_ms = g->ttl_ms;
    lock->acquired_ms = g->base_ms;
    lock->renew_base_ms = g->base_ms;
    atomic_init(&lock->valid_until_ms, g->valid_until_ms);
    atomic_init(&lock->state, DLOCK__HELD);
    atomic_init(&lock->renewals, 0);
    atomic_init(&lock->reg_client, NULL);
    atomic_init(&lock->held_in, NULL);
    *out = lock;
    return DLOCK_OK;
}

int dlock__check_owner(const dlock_client *c, const dlock_lock *lock, const char *op, char *errbuf)
{
    /* An id, not the client's address: a client freed and another one
     * allocated at the same address must not adopt the old client's locks. */
    if (lock->client_id == c->id)
        return 0;
    dlock__errf(errbuf, "%s \"%s\": lock belongs to another client (its nodes and key prefix "
                "are where the lock lives)", op, lock->resource);
    return -1;
}

void dlock__lock_destroy(dlock_lock *lock)
{
    if (lock == NULL)
        return;
    if (lock->multi != NULL) {
        /* names[0] is lock->resource: freed once, below. */
        for (size_t i = 1; i < lock->multi->n; i++)
            free(lock->multi->names[i]);
        free(lock->multi->names);
        free(lock->multi->fences);
        free(lock->multi);
    }
    free(lock->resource);
    free(lock);
}

const char *dlock_lock_resource(const dlock_lock *lock)
{
    return lock != NULL ? lock->resource : "";
}

const char *dlock_lock_token(const dlock_lock *lock)
{
    return lock != NULL ? lock->token : "";
}

uint64_t dlock_lock_fence(const dlock_lock *lock)
{
    return lock != NULL ? lock->fence : 0;
}

size_t dlock_lock_count(const dlock_lock *lock)
{
    if (lock == NULL)
        return 0;
    return lock->multi != NULL ? lock->multi->n : 1;
}

const char *dlock_lock_resource_of(const dlock_lock *lock, size_t i)
{
    if (lock == NULL || i >= dlock_lock_count(lock))
        return "";
    return i == 0 ? lock->resource : lock->multi->names[i];
}

uint64_t dlock_lock_fence_of(const dlock_lock *lock, size_t i)
{
    if (lock == NULL || i >= dlock_lock_count(lock))
        return 0;
    return i == 0 ? lock->fence : lock->multi->fences[i];
}

int64_t dlock_lock_valid_until_ms(const dlock_lock *lock)
{
    return lock != NULL ? atomic_load(&lock->valid_until_ms) : 0;
}

int64_t dlock_lock_validity_ms(const dlock_lock *lock)
{
    int64_t left;

    if (lock == NULL || atomic_load(&lock->state) != DLOCK__HELD)
        return 0;
    left = atomic_load(&lock->valid_until_ms) - dlock_now_ms();
    return left > 0 ? left : 0;
}

int dlock_is_held(const dlock_lock *lock)
{
    return dlock_lock_validity_ms(lock) > 0;
}

uint32_t dlock_lock_renewals(const dlock_lock *lock)
{
    return lock != NULL ? atomic_load(&lock->renewals) : 0;
}

void dlock__held_add(dlock_client *c, dlock_lock *lock)
{
    lock->owner = pthread_self();
    lock->held_prev = NULL;
    lock->held_next = c->held_head;
    if (c->held_head != NULL)
        c->held_head->held_prev = lock;
    c->held_head = lock;
    atomic_store(&lock->held_in, c);
}

void dlock__held_remove(dlock_client *c, dlock_lock *lock)
{
    if (atomic_load(&lock->held_in) != c)
        return;
    if (lock->held_prev != NULL)
        lock->held_prev->held_next = lock->held_next;
    else
        c->held_head = lock->held_next;
    if (lock->held_next != NULL)
        lock->held_next->held_prev = lock->held_prev;
    lock->held_prev = lock->held_next = NULL;
    atomic_store(&lock->held_in, NULL);
}

/* Whether lock covers name: its resource, or one of a multi lock's. */
static const char *covers(const dlock_lock *lock, const char *name)
{
    if (lock->multi == NULL)
        return strcmp(lock->resource, name) == 0 ? lock->resource : NULL;
    for (size_t i = 0; i < lock->multi->n; i++)
        if (strcmp(lock->multi->names[i], name) == 0)
            return lock->multi->names[i];
    return NULL;
}

const dlock_lock *dlock__held_by_caller(const dlock_client *c, const char *const *names,
                                        size_t n, const char **which)
{
    int64_t now = dlock_now_ms();

    for (const dlock_lock *l = c->held_head; l != NULL; l = l->held_next) {
        /* Another thread sharing the client waits for it as for anyone;
         * a lock that ran out or was lost no longer holds the key. */
        /* A kept lock (cache.c) is the client's, in no thread's hands. */
        if (l->cached || !pthread_equal(l->owner, pthread_self()) || l->release_sent ||
            atomic_load(&l->state) != DLOCK__HELD || atomic_load(&l->valid_until_ms) <= now)
            continue;
        for (size_t i = 0; i < n; i++)
            if ((*which = covers(l, names[i])) != NULL)
                return l;
    }
    return NULL;
}

void dlock__held_clear(dlock_client *c)
{
    while (c->held_head != NULL)
        dlock__held_remove(c, c->held_head);
}

const char *dlock_lock_lost_detail(const dlock_lock *lock, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return "";
    snprintf(buf, len, "%s", lock != NULL && atomic_load(&lock->state) == DLOCK__LOST
                                 ? lock->lost_detail : "");
    return buf;
}
