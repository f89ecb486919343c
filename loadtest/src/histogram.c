/* histogram.c - log-linear latency histogram (HdrHistogram-like): record,
 * merge, quantiles; fixed memory, no sorting of samples. */
#include "loadtest.h"

#include <math.h>
#include <string.h>

#define SUB_COUNT (1u << LT_HIST_SUB_BITS)
#define VALUE_CAP ((UINT64_C(1) << LT_HIST_MAX_BITS) - 1)

void lt_hist_init(lt_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

static unsigned msb64(uint64_t v)
{
    return 63u - (unsigned)__builtin_clzll(v);
}

unsigned lt_hist_index(uint64_t us)
{
    unsigned msb, shift;
    if (us > VALUE_CAP)
        us = VALUE_CAP;
    if (us < SUB_COUNT)
        return (unsigned)us;
    msb = msb64(us);
    /* Keep the top SUB_BITS bits: the leading 1 plus 6 bits of mantissa, so
     * every power-of-two range [2^k, 2^(k+1)) gets HALF equal-width buckets. */
    shift = msb - (LT_HIST_SUB_BITS - 1);
    return SUB_COUNT + (shift - 1) * LT_HIST_HALF + (unsigned)((us >> shift) - LT_HIST_HALF);
}

uint64_t lt_hist_bucket_low(unsigned idx)
{
    unsigned shift, sub;
    if (idx < SUB_COUNT)
        return idx;
    shift = (idx - SUB_COUNT) / LT_HIST_HALF + 1;
    sub = (idx - SUB_COUNT) % LT_HIST_HALF + LT_HIST_HALF;
    return (uint64_t)sub << shift;
}

uint64_t lt_hist_bucket_high(unsigned idx)
{
    unsigned shift;
    if (idx < SUB_COUNT)
        return idx;
    shift = (idx - SUB_COUNT) / LT_HIST_HALF + 1;
    return lt_hist_bucket_low(idx) + (UINT64_C(1) << shift) - 1;
}

void lt_hist_record(lt_hist *h, uint64_t us)
{
    h->counts[lt_hist_index(us)]++;
    h->n++;
    h->sum += us;
    if (us < h->min)
        h->min = us;
    if (us > h->max)
        h->max = us;
}

void lt_hist_merge(lt_hist *dst, const lt_hist *src)
{
    for (unsigned i = 0; i < LT_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->n += src->n;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t lt_hist_quantile(const lt_hist *h, double q)
{
    uint64_t rank, seen = 0;
    if (h->n == 0)
        return 0;
    if (q <= 0)
        return h->min;
    if (q >= 1)
        return h->max;
    /* The ceil(q*n)-th smallest sample (1-based), as the nearest-rank definition. */
    rank = (uint64_t)ceil(q * (double)h->n);
    if (rank == 0)
        rank = 1;
    for (unsigned i = 0; i < LT_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = lt_hist_bucket_high(i);
            /* The bucket's top may lie above every sample; never report more than was seen. */
            return v > h->max ? h->max : (v < h->min ? h->min : v);
        }
    }
    return h->max;
}

double lt_hist_mean(const lt_hist *h)
{
    return h->n == 0 ? 0.0 : (double)h->sum / (double)h->n;
}
