/* metrics.c - request, claim and lock counters as relaxed atomics, rendered
 * in the Prometheus text format (version 0.0.4) through open_memstream.
 *
 * Each family counts one thing once: the claims by result add up to the
 * claims answered; the lock errors by kind add up to the claims that gave up
 * on the lock; the sold-out paths add up to the sold-out claims. */
#include "core/metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* Request duration buckets in microseconds: a claim under no contention
 * takes a few hundred microseconds, one that waits for the lock up to
 * --lock-wait (1 s by default). */
static const int64_t LATENCY_BUCKETS_US[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000,
                                             100000, 250000, 500000, 1000000, 2500000, 5000000};
#define N_LATENCY (sizeof LATENCY_BUCKETS_US / sizeof LATENCY_BUCKETS_US[0])

/* A histogram: non-cumulative buckets (the last one is +Inf only) and the sum. */
typedef struct histogram {
    counter bucket[N_LATENCY + 1];
    counter sum_us;
} histogram;

static counter requests_total[METRICS_MAX_ROUTES][N_STATUS + 1]; /* last column: other statuses */
static histogram request_latency[METRICS_MAX_ROUTES];
/* Set on a route's first request; the render shows only routes with a label. */
static _Atomic(const char *) route_labels[METRICS_MAX_ROUTES];
static counter claims_total[CLAIM__COUNT];
static counter sold_out_fast, sold_out_locked;
static counter lock_acquired, lock_combined, lock_held_batches, lock_retries, lock_lost, lock_release_errors, fence_heals;
static counter lock_errors[LOCK_ERROR__COUNT];
static counter wait_bucket[N_WAIT + 1]; /* non-cumulative; last = +Inf only */
static counter wait_sum_us;
static atomic_uint_fast64_t nodes_up, nodes_total, nodes_quorum;
static atomic_uint_fast64_t claims_waiting; /* in the claim queue, for a claim worker */
static counter stage_us[STAGE__COUNT], stage_n[STAGE__COUNT];
static const char *const STAGE_LABELS[STAGE__COUNT] = {
    [STAGE_HTTP_IN] = "http_in",   [STAGE_CLAIM_QUEUE] = "claim_queue", [STAGE_LOCAL_QUEUE] = "local_queue",
    [STAGE_LOCK] = "lock",         [STAGE_READ] = "read",               [STAGE_WORK] = "work",
    [STAGE_COMMIT] = "commit",     [STAGE_RELEASE] = "release",         [STAGE_RESUME] = "resume",
    [STAGE_REPLY] = "reply",
};
/* Written once by metrics_init before any thread: plain values. */
static double start_time_s;
static const char *build_version = "unknown";

static void inc(counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t get(counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

void metrics_init(const char *version)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        start_time_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (version != NULL)
        build_version = version;
}

static size_t bucket_of(const int64_t *bounds, size_t n, int64_t us)
{
    for (size_t i = 0; i < n; i++)
        if (us <= bounds[i])
            return i;
    return n;
}

void metrics_request(unsigned route, const char *route_label, unsigned status, int64_t duration_us)
{
    size_t col = N_STATUS;
    for (size_t i = 0; i < N_STATUS; i++)
        if (STATUSES[i] == status)
            col = i;
    if (route >= METRICS_MAX_ROUTES)
        return;
    if (duration_us < 0)
        duration_us = 0;
    /* The label goes in before the count (release; the render acquires), so
     * a rendered label always points at the caller's whole static string. */
    atomic_store_explicit(&route_labels[route], route_label, memory_order_release);
    inc(&requests_total[route][col], 1);
    inc(&request_latency[route].bucket[bucket_of(LATENCY_BUCKETS_US, N_LATENCY, duration_us)], 1);
    inc(&request_latency[route].sum_us, (uint64_t)duration_us);
}

void metrics_claim(claim_result r)
{
    if ((unsigned)r < CLAIM__COUNT)
        inc(&claims_total[r], 1);
}

static counter bundles_total[CLAIM__COUNT];

void metrics_bundle(claim_result r)
{
    if ((unsigned)r < CLAIM__COUNT)
        inc(&bundles_total[r], 1);
}

void metrics_sold_out(int fast)
{
    inc(fast ? &sold_out_fast : &sold_out_locked, 1);
}

static counter stock_peeks[STOCK_PEEK__COUNT];
static const char *const STOCK_PEEK_LABELS[STOCK_PEEK__COUNT] = {
    [STOCK_PEEK_ISSUED] = "issued", [STOCK_PEEK_SAVED] = "saved", [STOCK_PEEK_COALESCED] = "coalesced"};

void metrics_stock_peek(stock_peek_kind k)
{
    if ((unsigned)k < STOCK_PEEK__COUNT)
        inc(&stock_peeks[k], 1);
}

void metrics_lock_wait_us(int64_t us)
{
    if (us < 0)
        us = 0;
    inc(&wait_bucket[bucket_of(WAIT_BUCKETS_US, N_WAIT, us)], 1);
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

void metrics_lock_held_batch(void)
{
    inc(&lock_held_batches, 1);
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

void metrics_lock_release_error(void)
{
    inc(&lock_release_errors, 1);
}

void metrics_lock_lost(void)
{
    inc(&lock_lost, 1);
}

void metrics_fence_healed(void)
{
    inc(&fence_heals, 1);
}

void metrics_lock_nodes(size_t up, size_t nodes, size_t quorum)
{
    atomic_store_explicit(&nodes_up, up, memory_order_relaxed);
    atomic_store_explicit(&nodes_total, nodes, memory_order_relaxed);
    atomic_store_explicit(&nodes_quorum, quorum, memory_order_relaxed);
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
    header(f, name, type, help);
    fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

/* The series of one histogram; labels is "" or `route="...",`. */
static void histogram_series(FILE *f, const char *name, const char *labels, const int64_t *bounds, size_t n,
                             counter *buckets, counter *sum_us)
{
    uint64_t cum = 0;

    for (size_t i = 0; i < n; i++) {
        cum += get(&buckets[i]);
        fprintf(f, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels, (double)bounds[i] / 1e6, (unsigned long long)cum);
    }
    cum += get(&buckets[n]);
    fprintf(f, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    /* Strip the trailing comma for the braces of _sum and _count. */
    int ll = 0;
    while (labels[ll] != '\0')
        ll++;
    if (ll > 0)
        ll--;
    fprintf(f, "%s_sum%s%.*s%s %.6f\n", name, ll ? "{" : "", ll, labels, ll ? "}" : "", (double)get(sum_us) / 1e6);
    /* _count is the +Inf bucket itself, so a scrape racing an observation
     * still sees the two equal, as the format requires. */
    fprintf(f, "%s_count%s%.*s%s %llu\n", name, ll ? "{" : "", ll, labels, ll ? "}" : "", (unsigned long long)cum);
}

static void render(FILE *f)
{
    const char *labels[METRICS_MAX_ROUTES];

    for (size_t r = 0; r < METRICS_MAX_ROUTES; r++)
        labels[r] = atomic_load_explicit(&route_labels[r], memory_order_acquire);

    header(f, "coupon_http_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (size_t r = 0; r < METRICS_MAX_ROUTES; r++) {
        for (size_t s = 0; labels[r] != NULL && s <= N_STATUS; s++) {
            uint64_t v = get(&requests_total[r][s]);
            if (v == 0)
                continue;
            if (s < N_STATUS)
                fprintf(f, "coupon_http_requests_total{route=\"%s\",status=\"%u\"} %llu\n", labels[r], STATUSES[s],
                        (unsigned long long)v);
            else
                fprintf(f, "coupon_http_requests_total{route=\"%s\",status=\"other\"} %llu\n", labels[r],
                        (unsigned long long)v);
        }
    }

    header(f, "coupon_http_request_duration_seconds", "histogram",
           "Time from a request's arrival to its queued answer, by route.");
    for (size_t r = 0; r < METRICS_MAX_ROUTES; r++) {
        char lab[96];
        if (labels[r] == NULL)
            continue;
        snprintf(lab, sizeof lab, "route=\"%s\",", labels[r]);
        histogram_series(f, "coupon_http_request_duration_seconds", lab, LATENCY_BUCKETS_US, N_LATENCY,
                         request_latency[r].bucket, &request_latency[r].sum_us);
    }

    header(f, "coupon_claims_total", "counter",
           "Claims with valid parameters, by the result answered (sold_out includes the fast path before the lock).");
    for (size_t c = 0; c < CLAIM__COUNT; c++)
        fprintf(f, "coupon_claims_total{result=\"%s\"} %llu\n", claim_outcome_of((claim_result)c)->label,
                (unsigned long long)get(&claims_total[c]));

    header(f, "coupon_bundles_total", "counter", "Bundle claims with valid parameters, by the result answered.");
    for (size_t c = 0; c < CLAIM__COUNT; c++)
        fprintf(f, "coupon_bundles_total{result=\"%s\"} %llu\n", claim_outcome_of((claim_result)c)->label,
                (unsigned long long)get(&bundles_total[c]));

    header(f, "coupon_sold_out_total", "counter",
           "Claims answered sold out, by where: fast = before the lock, locked = by the store under the lock.");
    fprintf(f, "coupon_sold_out_total{path=\"fast\"} %llu\n", (unsigned long long)get(&sold_out_fast));
    fprintf(f, "coupon_sold_out_total{path=\"locked\"} %llu\n", (unsigned long long)get(&sold_out_locked));

    header(f, "coupon_stock_peeks_total", "counter",
           "The sold-out fast path's stock questions (one per claim, one per coupon of a bundle): issued = store "
           "round trips made (db_peek_stock), saved = answered from this server's stock view, coalesced = waited "
           "for another request's round trip of the same coupon.");
    for (size_t k = 0; k < STOCK_PEEK__COUNT; k++)
        fprintf(f, "coupon_stock_peeks_total{result=\"%s\"} %llu\n", STOCK_PEEK_LABELS[k],
                (unsigned long long)get(&stock_peeks[k]));

    one(f, "coupon_lock_acquisitions_total", "counter", "Distributed locks acquired.", get(&lock_acquired));
    one(f, "coupon_lock_combined_claims_total", "counter",
        "Claims run in a batch under the lock taken for an older claim of that batch (its coupon's lane).", get(&lock_combined));
    one(f, "coupon_lock_held_batches_total", "counter",
        "Batches run under a lock kept from an earlier batch, without a new acquisition.",
        get(&lock_held_batches));

    header(f, "coupon_lock_wait_seconds", "histogram", "Time from a claim's start until it ran under a lock (or gave up).");
    histogram_series(f, "coupon_lock_wait_seconds", "", WAIT_BUCKETS_US, N_WAIT, wait_bucket, &wait_sum_us);

    one(f, "coupon_lock_retries_total", "counter", "Lock attempts after the first within one acquisition.",
        get(&lock_retries));

    header(f, "coupon_lock_errors_total", "counter", "Claims that gave up on the lock, by why.");
    for (size_t k = 0; k < LOCK_ERROR__COUNT; k++)
        fprintf(f, "coupon_lock_errors_total{kind=\"%s\"} %llu\n", lock_error_label((lock_error_kind)k),
                (unsigned long long)get(&lock_errors[k]));

    one(f, "coupon_lock_release_errors_total", "counter",
        "Releases that reached no quorum (the key expires after its TTL).", get(&lock_release_errors));
    one(f, "coupon_lock_lost_total", "counter", "Releases that found the lock no longer ours (lease ran out before release).",
        get(&lock_lost));
    one(f, "coupon_fence_heals_total", "counter",
        "Fence counters raised to the store's last fence after a fresh holder was refused (Redis lost its data).",
        get(&fence_heals));

    header(f, "coupon_claim_stage_seconds_total", "counter",
           "Time claims spent in each stage (a batch's lock, section and release counted once per batch).");
    for (size_t k = 0; k < STAGE__COUNT; k++)
        fprintf(f, "coupon_claim_stage_seconds_total{stage=\"%s\"} %.6f\n", STAGE_LABELS[k],
                (double)get(&stage_us[k]) / 1e6);
    header(f, "coupon_claim_stage_observations_total", "counter", "Passes through each stage (claims, or batches).");
    for (size_t k = 0; k < STAGE__COUNT; k++)
        fprintf(f, "coupon_claim_stage_observations_total{stage=\"%s\"} %llu\n", STAGE_LABELS[k],
                (unsigned long long)get(&stage_n[k]));

    one(f, "coupon_claims_waiting", "gauge",
        "Claims accepted and waiting in the claim queue for a claim worker (--claim-queue bounds it).",
        atomic_load_explicit(&claims_waiting, memory_order_relaxed));
    one(f, "coupon_lock_nodes", "gauge", "Redis nodes of the lock service (0 for strategies without one).",
        atomic_load_explicit(&nodes_total, memory_order_relaxed));
    one(f, "coupon_lock_nodes_up", "gauge", "Redis nodes that answered the last health probe.",
        atomic_load_explicit(&nodes_up, memory_order_relaxed));
    one(f, "coupon_lock_quorum", "gauge", "Nodes that must answer for the lock to work (N/2 + 1).",
        atomic_load_explicit(&nodes_quorum, memory_order_relaxed));

    header(f, "coupon_build_info", "gauge", "The coupon-server build; the value is always 1.");
    fprintf(f, "coupon_build_info{version=\"%s\"} 1\n", build_version);
    header(f, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.");
    fprintf(f, "process_start_time_seconds %.3f\n", start_time_s);
}

void metrics_stage_us(claim_stage s, int64_t us)
{
    if ((unsigned)s >= STAGE__COUNT)
        return;
    inc(&stage_us[s], us > 0 ? (uint64_t)us : 0); /* a clock never steps back, but never add a wrapped value */
    inc(&stage_n[s], 1);
}

void metrics_claims_waiting(size_t n)
{
    atomic_store_explicit(&claims_waiting, n, memory_order_relaxed);
}

char *metrics_render(size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);

    if (f == NULL)
        return NULL;
    render(f);
    /* An append that ran out of memory sets the stream's error flag; the
     * text is then incomplete and is not served. */
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}
