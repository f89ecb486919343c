/* error.c - static texts for dlock_err codes and the error-detail formatter. */
#include "dlock_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A switch without `default:` so that -Wswitch (on with -Wall -Werror)
 * refuses to build when a code is appended to dlock_err but not here. */
const char *dlock_strerror(dlock_err err)
{
    switch (err) {
    case DLOCK_OK:
        return "success";
    case DLOCK_ERR_ARG:
        return "invalid argument";
    case DLOCK_ERR_TAKEN:
        return "lock is held by another owner";
    case DLOCK_ERR_TIMEOUT:
        return "redis did not answer in time";
    case DLOCK_ERR_UNREACHABLE:
        return "redis is unreachable";
    case DLOCK_ERR_NO_QUORUM:
        return "fewer than a quorum of redis nodes answered";
    case DLOCK_ERR_LOST:
        return "lock is no longer held (expired or taken over)";
    case DLOCK_ERR_EXPIRED:
        return "lock validity used up while acquiring";
    case DLOCK_ERR_NOMEM:
        return "out of memory";
    case DLOCK_ERR_PROTOCOL:
        return "unexpected reply from redis";
    case DLOCK_ERR_AUTH:
        return "redis refused authentication";
    case DLOCK_ERR_FENCE_SYNC:
        return "lock granted by a quorum but its fence counters could not be synchronised";
    case DLOCK_ERR_CANCELLED:
        return "the call was cancelled";
    }
    return "unknown dlock error";
}

int dlock_err_is_unavailable(dlock_err err)
{
    switch (err) {
    case DLOCK_ERR_TIMEOUT:
    case DLOCK_ERR_UNREACHABLE:
    case DLOCK_ERR_NO_QUORUM:
    case DLOCK_ERR_AUTH:
    case DLOCK_ERR_PROTOCOL:
    /* The nodes that granted the lock did not all take the fence sync:
     * the same outage as a missing quorum, one round later. */
    case DLOCK_ERR_FENCE_SYNC:
        return 1;
    case DLOCK_OK:
    case DLOCK_ERR_ARG:
    case DLOCK_ERR_TAKEN:
    case DLOCK_ERR_LOST:
    case DLOCK_ERR_EXPIRED:
    case DLOCK_ERR_NOMEM:
    case DLOCK_ERR_CANCELLED:
        return 0;
    }
    return 0;
}

/* Formats into a DLOCK_ERRSTR_LEN buffer, truncating: error paths never
 * allocate (the failure may itself be an out-of-memory). */
void dlock__errf(char *buf, const char *fmt, ...)
{
    va_list ap;

    if (buf == NULL)
        return;
    va_start(ap, fmt);
    if (vsnprintf(buf, DLOCK_ERRSTR_LEN, fmt, ap) < 0)
        buf[0] = '\0';
    va_end(ap);
}

/* Same for the DLOCK__DETAIL_LEN per-node detail of a round result. */
void dlock__detailf(char *buf, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (vsnprintf(buf, DLOCK__DETAIL_LEN, fmt, ap) < 0)
        buf[0] = '\0';
    va_end(ap);
}

/* strerror() may format unknown codes into one static buffer shared by all
 * threads; the XSI strerror_r writes into the caller's buffer instead. */
const char *dlock__strerror(int err, char *buf, size_t len)
{
    if (strerror_r(err, buf, len) != 0)
        snprintf(buf, len, "error %d", err);
    return buf;
}
