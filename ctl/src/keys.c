/* keys.c - where libdlock keeps a lock in Redis: the one place dlockctl
 * knows the key layout. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* THE key layout, mirrored from libdlock (lock/src/acquire.c:
 * dlock__lock_key and the fence key built beside it):
 *   lock key  = <prefix><resource>        value: the holder's 32-hex token, PX ttl
 *   fence key = <prefix><resource>:fence  value: the fence counter, no TTL
 * If libdlock moves its fence keys (to a namespace of their own), change
 * this function and nothing else: list finds locks by their value (a token
 * with a TTL, see ctl_is_token), not by the fence key's name. */
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
    if (snprintf(out->lock, sizeof(out->lock), "%s%s", prefix, resource) >=
            (int)sizeof(out->lock) ||
        snprintf(out->fence, sizeof(out->fence), "%s%s:fence", prefix, resource) >=
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
    if (j + 2 > outlen)
        return -1;
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
