/* keys.c - where libdlock keeps a lock in Redis: the one place dlockctl
 * knows the key layout. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* THE key layout, from dlock.h ("Keys"), in two namespaces so that no
 * resource name is another resource's counter:
 *   lock key  = <prefix>lock:<resource>   value: the holder's 32-hex token, PX ttl
 *   fence key = <prefix>fence:<resource>  value: the fence counter, no TTL
 * list scans <prefix>lock:* (ctl_scan_pattern) and still checks each value
 * (a token with a TTL, see ctl_is_token). */
int ctl_resource_keys(const char *prefix, const char *resource, ctl_keys *out, char *err,
                      size_t errlen)
{
    size_t len = strlen(prefix) + strlen(resource);

    if (resource[0] == '\0') {
        snprintf(err, errlen, "empty resource name");
        return -1;
    }
    /* The same limit libdlock enforces on prefix + resource. */
    if (len > DLOCK_MAX_KEY_LEN) {
        snprintf(err, errlen, "prefix + resource is %zu bytes, longer than %d", len,
                 DLOCK_MAX_KEY_LEN);
        return -1;
    }
    if (snprintf(out->lock, sizeof(out->lock), "%s%s%s", prefix, DLOCK_LOCK_NS, resource) >=
            (int)sizeof(out->lock) ||
        snprintf(out->fence, sizeof(out->fence), "%s%s%s", prefix, DLOCK_FENCE_NS, resource) >=
            (int)sizeof(out->fence)) {
        snprintf(err, errlen, "key too long");
        return -1;
    }
    return 0;
}

/* SCAN's MATCH is a glob: a prefix holding * ? [ ] or \ must match itself. */
int ctl_scan_pattern(const char *prefix, char *out, size_t outlen)
{
    size_t j = 0;

    for (const char *p = prefix; *p != '\0'; p++) {
        if (strchr("*?[]\\", *p) != NULL) {
            if (j + 1 >= outlen)
                return -1;
            out[j++] = '\\';
        }
        if (j + 1 >= outlen)
            return -1;
        out[j++] = *p;
    }
    /* Then the lock namespace (no glob characters in it): fence counters
     * are not even looked at. */
    if (j + strlen(DLOCK_LOCK_NS) + 2 > outlen)
        return -1;
    memcpy(out + j, DLOCK_LOCK_NS, strlen(DLOCK_LOCK_NS));
    j += strlen(DLOCK_LOCK_NS);
    out[j++] = '*';
    out[j] = '\0';
    return 0;
}

int ctl_is_token(const char *value, size_t len)
{
    if (len != DLOCK_TOKEN_LEN - 1)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (strchr("0123456789abcdef", value[i]) == NULL || value[i] == '\0')
            return 0;
    return 1;
}
