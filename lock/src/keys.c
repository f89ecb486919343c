/* keys.c - the names of libdlock's keys (dlock.h, "Keys"):
 * - the lock key and the fence counter of a resource;
 * - the waiters set and each waiter's own list;
 * - the key and argument sets the queue and multi scripts take (pass.lua's
 *   for one resource, the multi_*.lua scripts' for several).
 * Every file that names a key calls these; dlockctl mirrors them in
 * ctl/src/keys.c (ctl_resource_keys). */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* The key layout (dlock.h, "Keys"): every key starts with the prefix and
 * then a namespace word. So a lock key and a fence key can never be the same
 * string whatever the resource names are ("lock:" and "fence:" differ in
 * their first byte). With the counter at "<resource>:fence" instead, the
 * resource "coll:fence" would be the fence counter of "coll": an INCRed
 * integer with no TTL that SET NX refuses forever (lock_safety
 * lock_and_fence_keys_never_collide). */
static int key_in(const dlock_client *c, const char *space, const char *resource, char *out,
                  size_t outlen)
{
    int len = snprintf(out, outlen, "%s%s%s", c->prefix, space, resource);

    return (len < 0 || (size_t)len >= outlen) ? -1 : 0;
}

int dlock__lock_key(const dlock_client *c, const char *resource, char *out, size_t outlen)
{
    return key_in(c, DLOCK_LOCK_NS, resource, out, outlen);
}

int dlock__fence_key(const dlock_client *c, const char *resource, char *out, size_t outlen)
{
    return key_in(c, DLOCK_FENCE_NS, resource, out, outlen);
}

/* kind: DLOCK_WAITERS_NS (dlock.h, "Keys"). */
int dlock__wake_key(const dlock_client *c, const char *kind, const char *resource, char *out,
                    size_t outlen)
{
    return key_in(c, kind, resource, out, outlen);
}

int dlock__pass_prepare(const dlock_client *c, const char *resource, const char *token,
                        dlock__pass_buf *b)
{
    int a, s;

    if (dlock__lock_key(c, resource, b->key, sizeof(b->key)) != 0 ||
        dlock__fence_key(c, resource, b->fkey, sizeof(b->fkey)) != 0 ||
        dlock__wake_key(c, DLOCK_WAITERS_NS, resource, b->waiters, sizeof(b->waiters)) != 0)
        return -1;
    a = snprintf(b->list_prefix, sizeof(b->list_prefix), "%s%s", c->prefix, DLOCK_WAITER_NS);
    s = snprintf(b->list_suffix, sizeof(b->list_suffix), ":%s", resource);
    if (a < 0 || (size_t)a >= sizeof(b->list_prefix) || s < 0 ||
        (size_t)s >= sizeof(b->list_suffix))
        return -1;
    b->keys[0] = b->key;
    b->keys[1] = b->fkey;
    b->keys[2] = b->waiters;
    b->args[0] = token;
    b->args[1] = b->list_prefix;
    b->args[2] = b->list_suffix;
    b->args[3] = c->n > 1 && c->wake_on_release ? "1" : "0";
    return 0;
}

int dlock__waiter_list(const dlock__pass_buf *b, const char *token, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s%s%s", b->list_prefix, token, b->list_suffix);

    return (n < 0 || (size_t)n >= outlen) ? -1 : 0;
}

dlock__multi_keys *dlock__multi_keys_new(const dlock_client *c, const char *const *names,
                                         size_t n, const char *token)
{
    dlock__multi_keys *mk = malloc(sizeof(*mk));
    int w;

    if (mk == NULL)
        return NULL;
    mk->n = n;
    w = snprintf(mk->list_prefix, sizeof(mk->list_prefix), "%s%s", c->prefix, DLOCK_WAITER_NS);
    if (w < 0 || (size_t)w >= sizeof(mk->list_prefix))
        goto fail;
    snprintf(mk->n_s, sizeof(mk->n_s), "%zu", n);
    mk->args[0] = token;
    mk->args[1] = mk->n_s;
    mk->args[2] = mk->list_prefix;
    for (size_t i = 0; i < n; i++) {
        if (dlock__lock_key(c, names[i], mk->buf[i], sizeof(mk->buf[i])) != 0 ||
            dlock__fence_key(c, names[i], mk->buf[n + i], sizeof(mk->buf[n + i])) != 0 ||
            dlock__wake_key(c, DLOCK_WAITERS_NS, names[i], mk->buf[2 * n + i],
                            sizeof(mk->buf[2 * n + i])) != 0)
            goto fail;
        /* A waiter's list is <prefix>waiter:<token>:<resource>
         * (dlock__waiter_list): hand_over builds it from the head waiter's
         * token. */
        w = snprintf(mk->suffix[i], sizeof(mk->suffix[i]), ":%s", names[i]);
        if (w < 0 || (size_t)w >= sizeof(mk->suffix[i]))
            goto fail;
        mk->keys[i] = mk->buf[i];
        mk->keys[n + i] = mk->buf[n + i];
        mk->keys[2 * n + i] = mk->buf[2 * n + i];
        mk->args[3 + i] = mk->suffix[i];
    }
    return mk;
fail:
    free(mk);
    return NULL;
}
