/* hist.c - log-linear latency histogram (HdrHistogram idea, fixed size, no sort). */
#include <string.h>

#include "bench.h"

#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_CLAMP_US ((UINT64_C(1) << (HIST_MAX_SHIFT + HIST_SUB_BITS)) - 1)

/* Index of value v: v itself below 128; above, the top 8 significant bits
 * (128..255) shifted into the band of its power of two. */
static size_t bucket_of(uint64_t v)
{
    if (v < HIST_SUB)
        return (size_t)v;
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - HIST_SUB_BITS;
    return (size_t)shift * HIST_SUB + (size_t)(v >> shift);
}

/* Middle of bucket idx, in us. */
static double bucket_mid(size_t idx)
{
    if (idx < HIST_SUB)
        return (double)idx;
    int shift = (int)(idx / HIST_SUB) - 1;
    uint64_t m = idx % HIST_SUB + HIST_SUB;
    uint64_t lo = m << shift;
    uint64_t width = UINT64_C(1) << shift;
    return (double)lo + (double)(width - 1) / 2.0;
}

void hist_record(bench_hist *h, uint64_t us)
{
    if (us > h->max_us)
        h->max_us = us;
    /* Clamping keeps the index in range; the exact max is kept aside. */
    if (us > HIST_CLAMP_US)
        us = HIST_CLAMP_US;
    h->counts[bucket_of(us)]++;
    h->total++;
}

void hist_merge(bench_hist *into, const bench_hist *from)
{
    for (size_t i = 0; i < HIST_BUCKETS; i++)
        into->counts[i] += from->counts[i];
    into->total += from->total;
    if (from->max_us > into->max_us)
        into->max_us = from->max_us;
}

double hist_percentile_us(const bench_hist *h, double p)
{
    if (h->total == 0)
        return 0.0;
    uint64_t rank = (uint64_t)((p / 100.0) * (double)h->total);
    if ((double)rank < (p / 100.0) * (double)h->total)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            double mid = bucket_mid(i);
            /* Never report more than the exact maximum (top bucket's middle can exceed it). */
            return mid > (double)h->max_us ? (double)h->max_us : mid;
        }
    }
    return (double)h->max_us;
}
