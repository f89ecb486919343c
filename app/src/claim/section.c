/* section.c - the business step and the injected fault between the
 * critical section's read and its write (see section.h). */
#include "claim/section.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>

/* Claims this server has run through the section, for --fault-pause-ms
 * MS:EVERY (every EVERY-th claim stalls). Process-wide, like a GC pause. */
static atomic_uint_fast64_t claims_seen;

typedef struct section_step {
    const app_config *cfg;
} section_step;

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};

    /* Resume on EINTR with what is left: the window must stay as wide as asked. */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Between the read and the write, with no transaction open. */
static void business_step(void *arg, size_t n_claims)
{
    const app_config *cfg = ((const section_step *)arg)->cfg;
    int stall = 0;

    /* The business step: once per section, i.e. once per batch, like one
     * call to another service for the claims decided on this read. */
    if (cfg->work_us > 0)
        sleep_us(cfg->work_us);
    if (cfg->fault_pause_ms == 0)
        return;
    for (size_t i = 0; i < n_claims; i++) {
        uint64_t seen = atomic_fetch_add_explicit(&claims_seen, 1, memory_order_relaxed) + 1;
        if (seen % cfg->fault_pause_every == 0)
            stall = 1;
    }
    /* The fault: a GC pause, a swap storm or a SIGSTOP that outlives the
     * lease. Whoever holds the lock next reads and writes meanwhile; only
     * the fence keeps our stale read from being written afterwards. */
    if (stall)
        sleep_us((uint64_t)cfg->fault_pause_ms * 1000u);
}

db_status section_run(worker *w, const app_config *cfg, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                      db_claim_req *reqs, size_t n)
{
    section_step step = {cfg};

    return db_claim_section(w->db, coupon_id, mode, fence, reqs, n, business_step, &step);
}
