/* hist.c - log-linear latency histogram (HdrHistogram idea): record, merge,
 * quantiles; fixed memory, no sorting of samples. */
#include <string.h>

#include "common.h"

#define VALUE_CAP ((UINT64_C(1) << CM_HIST_MAX_BITS) - 1)

void cm_hist_init(cm_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

/* Index of v: v itself below CM_HIST_SUB; above, the top SUB_BITS+1
 * significant bits (CM_HIST_SUB..2*CM_HIST_SUB-1) shifted into the band of
 * v's power of two, so every range [2^k, 2^(k+1)) gets CM_HIST_SUB
 * equal-width buckets. */
unsigned cm_hist_index(uint64_t v)
{
    /* Clamping keeps the index in range; the exact max is kept aside. */
    if (v > VALUE_CAP)
        v = VALUE_CAP;
    if (v < CM_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - CM_HIST_SUB_BITS;
    return shift * CM_HIST_SUB + (unsigned)(v >> shift);
}

/* Width of bucket idx is 2^shift, its band (idx / SUB) minus one. */
static unsigned bucket_shift(unsigned idx)
{
    return idx / CM_HIST_SUB - 1;
}

uint64_t cm_hist_bucket_low(unsigned idx)
{
    if (idx < CM_HIST_SUB)
        return idx;
    uint64_t top_bits = idx % CM_HIST_SUB + CM_HIST_SUB;
    return top_bits << bucket_shift(idx);
}

uint64_t cm_hist_bucket_high(unsigned idx)
{
    if (idx < CM_HIST_SUB)
        return idx;
    return cm_hist_bucket_low(idx) + (UINT64_C(1) << bucket_shift(idx)) - 1;
}

void cm_hist_record(cm_hist *h, uint64_t v)
{
    h->counts[cm_hist_index(v)]++;
    h->n++;
    h->sum += v;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
}

void cm_hist_merge(cm_hist *dst, const cm_hist *src)
{
    for (unsigned i = 0; i < CM_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->n += src->n;
    dst->sum += src->sum;
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
}

/* The bucket holding the ceil(q*n)-th smallest sample (1-based), the
 * nearest-rank definition; h is not empty and 0 < q < 1. The ceiling is
 * taken by hand so that the library needs no libm. */
static unsigned bucket_at(const cm_hist *h, double q)
{
    double exact = q * (double)h->n;
    uint64_t rank = (uint64_t)exact;
    uint64_t seen = 0;
    if ((double)rank < exact)
        rank++;
    if (rank == 0)
        rank = 1;
    for (unsigned i = 0; i < CM_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank)
            return i;
    }
    return CM_HIST_BUCKETS - 1; /* not reached: the counts add up to n */
}

/* A bucket's top or middle may lie beyond every sample; never report a
 * value outside what was seen. */
static double within_seen(const cm_hist *h, double v)
{
    if (v > (double)h->max)
        return (double)h->max;
    if (v < (double)h->min)
        return (double)h->min;
    return v;
}

uint64_t cm_hist_quantile(const cm_hist *h, double q)
{
    if (h->n == 0)
        return 0;
    if (q <= 0)
        return h->min;
    if (q >= 1)
        return h->max;
    uint64_t v = cm_hist_bucket_high(bucket_at(h, q));
    return v > h->max ? h->max : (v < h->min ? h->min : v);
}

double cm_hist_quantile_mid(const cm_hist *h, double q)
{
    if (h->n == 0)
        return 0.0;
    if (q <= 0)
        return (double)h->min;
    if (q >= 1)
        return (double)h->max;
    unsigned idx = bucket_at(h, q);
    double lo = (double)cm_hist_bucket_low(idx);
    double width = (double)(cm_hist_bucket_high(idx) - cm_hist_bucket_low(idx) + 1);
    return within_seen(h, lo + (width - 1.0) / 2.0);
}

double cm_hist_mean(const cm_hist *h)
{
    return h->n == 0 ? 0.0 : (double)h->sum / (double)h->n;
}
