/* fault.c - the holder crash of --fault-crash-after-lock (see fault.h). */
#include "claim/fault.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static atomic_uint_fast64_t acquisitions;

void fault_lock_acquired(const app_config *cfg)
{
    if (cfg->fault_crash_after_lock == 0)
        return;
    uint64_t n = atomic_fetch_add_explicit(&acquisitions, 1, memory_order_relaxed) + 1;
    if (n != cfg->fault_crash_after_lock)
        return;
    char msg[96];
    int len = snprintf(msg, sizeof msg, "coupon-server: fault: exiting while holding the lock (acquisition %llu)\n",
                       (unsigned long long)n);
    /* write(2), not stdio: nothing buffered, nothing flushed, no atexit. */
    if (len > 0 && write(STDERR_FILENO, msg, (size_t)len) < 0) {
        /* Nothing to do: we are about to die either way. */
    }
    _exit(FAULT_CRASH_STATUS);
}
