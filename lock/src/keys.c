/* keys.c - the names of libdlock's keys (dlock.h, "Keys"): the lock key
 * and the fence counter of a resource, and the wake-on-release keys. Every
 * file that names a key calls these; dlockctl mirrors them in
 * ctl/src/keys.c (ctl_resource_keys). */
#include "dlock_internal.h"

#include <stdio.h>

/* The key layout (dlock.h, "Keys"): every key starts with the prefix and
 * then a namespace word, so a lock key and a fence key can never be the same
 * string whatever the resource names are ("lock:" and "fence:" differ in
 * their first byte). With the counter at "<resource>:fence" instead, the
 * resource "coll:fence" was the fence counter of "coll": an INCRed integer
 * with no TTL that SET NX refused forever. */
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
