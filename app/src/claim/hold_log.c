/* hold_log.c - the holder history (hold_log.h). */
#include "claim/hold_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static int log_fd = -1;
static atomic_int write_failed;

int hold_log_open(const char *path, char *errbuf, size_t errlen)
{
    if (path == NULL)
        return 0;
    /* O_APPEND: each write(2) lands whole at the current end, even with
     * other servers appending to the same file at once. */
    log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        snprintf(errbuf, errlen, "--hold-log %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void hold_log_close(void)
{
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
}

/* One whole line in one write(2); a failure is reported once per process. */
static void append_line(const char *line, size_t len)
{
    ssize_t w = write(log_fd, line, len);
    if (w != (ssize_t)len && atomic_exchange(&write_failed, 1) == 0)
        fprintf(stderr, "coupon-server: --hold-log: write failed: %s\n", w < 0 ? strerror(errno) : "short write");
}

int64_t hold_log_begin(const dlock_lock *lock)
{
    char line[512];
    int64_t now_us = cm_now_us();

    if (log_fd < 0)
        return now_us;
    int k = snprintf(line, sizeof line,
                     "begin pid=%ld resource=%s fence=%" PRIu64 " acquired_us=%" PRId64 " valid_until_us=%" PRId64 "\n",
                     (long)getpid(), dlock_lock_resource(lock), dlock_lock_fence(lock), now_us,
                     dlock_lock_valid_until_ms(lock) * 1000);
    if (k > 0 && (size_t)k < sizeof line)
        append_line(line, (size_t)k);
    return now_us;
}

static const char *outcome_of(db_status st, const db_claim_req *reqs, size_t n)
{
    if (st == DB_STALE_FENCE)
        return "refused";
    if (st != DB_OK)
        return "error";
    for (size_t i = 0; i < n; i++)
        if (reqs[i].status == DB_OK)
            return "applied";
    return "none";
}

void hold_log_note(const dlock_lock *lock, int64_t acquired_us, db_status st, const db_claim_req *reqs, size_t n)
{
    /* Below PIPE_BUF (4096), so one write is one whole line: 64 record ids
     * of 20 digits at most plus the fixed fields fit. */
    char line[PIPE_BUF];
    int64_t done_us = cm_now_us();
    size_t len;
    int k;

    if (log_fd < 0)
        return;
    k = snprintf(line, sizeof line,
                 "hold pid=%ld resource=%s fence=%" PRIu64 " acquired_us=%" PRId64 " valid_until_us=%" PRId64
                 " done_us=%" PRId64 " outcome=%s status=%d records=",
                 (long)getpid(), dlock_lock_resource(lock), dlock_lock_fence(lock), acquired_us,
                 dlock_lock_valid_until_ms(lock) * 1000, done_us, outcome_of(st, reqs, n), (int)st);
    if (k < 0 || (size_t)k >= sizeof line)
        return;
    len = (size_t)k;
    for (size_t i = 0; st == DB_OK && i < n; i++) {
        if (reqs[i].status != DB_OK)
            continue;
        k = snprintf(line + len, sizeof line - len, "%s%" PRId64, line[len - 1] == '=' ? "" : ",",
                     reqs[i].claim.record_id);
        if (k < 0 || (size_t)k >= sizeof line - len - 1)
            return; /* cannot happen for n <= CONFIG_MAX_BATCH; never a torn line */
        len += (size_t)k;
    }
    line[len++] = '\n';
    append_line(line, len);
}
