/* metrics.c - request, claim and lock counters as relaxed atomics, rendered
 * in the Prometheus text format (version 0.0.4). */
#include "core/metrics.h"

#include <stdatomic.h>
#include <time.h>

#include "core/strbuf.h"

/* Relaxed atomics: each counter is independent and only ever added to, so no
 * ordering is needed between them, and request threads never take a lock
 * just to count (a scrape sees each value at some recent instant). */
typedef atomic_uint_fast64_t counter;

static const unsigned STATUSES[] = {200, 201, 400, 401, 403, 404, 405, 409, 413, 431, 500, 503};
#define N_STATUS (sizeof STATUSES / sizeof STATUSES[0])

/* Lock wait buckets in microseconds (upper bounds, inclusive). */
static const int64_t WAIT_BUCKETS_US[] = {250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
                                          250000, 500000, 1000000, 2500000, 5000000};
#define N_WAIT (sizeof WAIT_BUCKETS_US / sizeof WAIT_BUCKETS_US[0])

static counter requests_total[METRICS_MAX_ROUTES][N_STATUS + 1]; /* last column: other statuses */
/* Set on a route's first request; the render shows only routes with a label. */
static _Atomic(const char *) route_labels[METRICS_MAX_ROUTES];
static counter claims_total[CLAIM__COUNT];
static counter sold_out_fast, sold_out_locked;
static counter lock_acquired, lock_combined, lock_retries, lock_lost;
static counter lock_errors[LOCK_ERROR__COUNT];
static counter wait_bucket[N_WAIT + 1]; /* non-cumulative; last = +Inf only */
static counter wait_sum_us;

static void inc(counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t get(counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

void metrics_request(unsigned route, const char *route_label, unsigned status)
{
    size_t col = N_STATUS;
    for (size_t i = 0; i < N_STATUS; i++)
        if (STATUSES[i] == status)
            col = i;
    if (route >= METRICS_MAX_ROUTES)
        return;
    /* The label goes in before the count (release; the render acquires), so
     * a rendered label always points at the caller's whole static string. */
    atomic_store_explicit(&route_labels[route], route_label, memory_order_release);
    inc(&requests_total[route][col], 1);
}

void metrics_claim(claim_result r)
{
    if ((unsigned)r < CLAIM__COUNT)
        inc(&claims_total[r], 1);
}

void metrics_sold_out(int fast)
{
    inc(fast ? &sold_out_fast : &sold_out_locked, 1);
}

void metrics_lock_wait_us(int64_t us)
{
    size_t b = N_WAIT;
    if (us < 0)
        us = 0;
    for (size_t i = 0; i < N_WAIT; i++) {
        if (us <= WAIT_BUCKETS_US[i]) {
            b = i;
            break;
        }
    }
    inc(&wait_bucket[b], 1);
    inc(&wait_sum_us, (uint64_t)us);
}

void metrics_lock_acquired(void)
{
    inc(&lock_acquired, 1);
}

void metrics_lock_combined(void)
{
    inc(&lock_combined, 1);
}

void metrics_lock_retries(uint64_t n)
{
    inc(&lock_retries, n);
}

void metrics_lock_error(lock_error_kind k)
{
    if ((unsigned)k < LOCK_ERROR__COUNT)
        inc(&lock_errors[k], 1);
}

void metrics_lock_lost(void)
{
    inc(&lock_lost, 1);
}

static void header(strbuf *sb, const char *name, const char *type, const char *help)
{
    sb_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_render(size_t *len)
{
    strbuf sb = {0};

    header(&sb, "coupon_http_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (size_t r = 0; r < METRICS_MAX_ROUTES; r++) {
        const char *label = atomic_load_explicit(&route_labels[r], memory_order_acquire);
        if (label == NULL)
            continue;
        for (size_t s = 0; s <= N_STATUS; s++) {
            uint64_t v = get(&requests_total[r][s]);
            if (v == 0)
                continue;
            if (s < N_STATUS)
                sb_printf(&sb, "coupon_http_requests_total{route=\"%s\",status=\"%u\"} %llu\n",
                          label, STATUSES[s], (unsigned long long)v);
            else
                sb_printf(&sb, "coupon_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                          label, (unsigned long long)v);
        }
    }

    header(&sb, "coupon_claims_total", "counter", "Claim attempts that reached the store or the lock, by result.");
    for (size_t c = 0; c < CLAIM__COUNT; c++)
        sb_printf(&sb, "coupon_claims_total{result=\"%s\"} %llu\n", claim_outcome_of((claim_result)c)->label,
                  (unsigned long long)get(&claims_total[c]));

    header(&sb, "coupon_sold_out_total", "counter",
           "Claims answered sold out: fast = before the lock, locked = by the store under the lock.");
    sb_printf(&sb, "coupon_sold_out_total{path=\"fast\"} %llu\n", (unsigned long long)get(&sold_out_fast));
    sb_printf(&sb, "coupon_sold_out_total{path=\"locked\"} %llu\n", (unsigned long long)get(&sold_out_locked));

    header(&sb, "coupon_lock_acquisitions_total", "counter", "Distributed locks acquired.");
    sb_printf(&sb, "coupon_lock_acquisitions_total %llu\n", (unsigned long long)get(&lock_acquired));

    header(&sb, "coupon_lock_combined_claims_total", "counter",
           "Claims run under an acquisition another request of this server made (combining).");
    sb_printf(&sb, "coupon_lock_combined_claims_total %llu\n", (unsigned long long)get(&lock_combined));

    header(&sb, "coupon_lock_wait_seconds", "histogram", "Time from a claim's start until it ran under a lock (or gave up).");
    uint64_t cum = 0;
    for (size_t i = 0; i < N_WAIT; i++) {
        cum += get(&wait_bucket[i]);
        sb_printf(&sb, "coupon_lock_wait_seconds_bucket{le=\"%g\"} %llu\n", (double)WAIT_BUCKETS_US[i] / 1e6,
                  (unsigned long long)cum);
    }
    cum += get(&wait_bucket[N_WAIT]);
    sb_printf(&sb, "coupon_lock_wait_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    sb_printf(&sb, "coupon_lock_wait_seconds_sum %.6f\n", (double)get(&wait_sum_us) / 1e6);
    /* _count is the +Inf bucket itself, so a scrape racing an observation
     * still sees the two equal, as the format requires. */
    sb_printf(&sb, "coupon_lock_wait_seconds_count %llu\n", (unsigned long long)cum);

    header(&sb, "coupon_lock_retries_total", "counter", "Lock attempts after the first within one acquisition.");
    sb_printf(&sb, "coupon_lock_retries_total %llu\n", (unsigned long long)get(&lock_retries));

    header(&sb, "coupon_lock_errors_total", "counter", "Lock failures, by kind.");
    for (size_t k = 0; k < LOCK_ERROR__COUNT; k++)
        sb_printf(&sb, "coupon_lock_errors_total{kind=\"%s\"} %llu\n", lock_error_label((lock_error_kind)k),
                  (unsigned long long)get(&lock_errors[k]));

    header(&sb, "coupon_lock_lost_total", "counter",
           "Releases that found the lock no longer ours (lease ran out before release).");
    sb_printf(&sb, "coupon_lock_lost_total %llu\n", (unsigned long long)get(&lock_lost));

    return sb_take(&sb, len);
}
