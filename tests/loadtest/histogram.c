/* histogram.c - the latency histogram: bucket bounds and precision,
 * quantiles against known data, merging per-thread histograms. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "loadtest.h"

static lt_hist h1, h2, hall; /* 18 KB each: static, not on Criterion's stack */

Test(loadtest_histogram, small_values_are_exact, .timeout = 10)
{
    for (uint64_t v = 0; v < 128; v++) {
        unsigned i = lt_hist_index(v);
        cr_assert_eq(i, v);
        cr_assert_eq(lt_hist_bucket_low(i), v);
        cr_assert_eq(lt_hist_bucket_high(i), v);
    }
}

static void check_value(uint64_t v)
{
    unsigned i = lt_hist_index(v);
    uint64_t lo = lt_hist_bucket_low(i), hi = lt_hist_bucket_high(i);
    cr_assert_lt(i, LT_HIST_BUCKETS, "index %u of %llu out of range", i, (unsigned long long)v);
    cr_assert(lo <= v && v <= hi, "%llu not in bucket %u [%llu, %llu]", (unsigned long long)v, i,
              (unsigned long long)lo, (unsigned long long)hi);
    /* Log-linear: a bucket is never wider than 1/64 of its low edge. */
    cr_assert_leq((hi - lo + 1) * 64, lo < 128 ? 64 : lo, "bucket %u too wide", i);
}

Test(loadtest_histogram, every_value_lands_in_a_tight_bucket, .timeout = 10)
{
    for (uint64_t v = 1; v < 200000; v++)
        check_value(v);
    for (unsigned b = 7; b < LT_HIST_MAX_BITS; b++) {
        uint64_t p = UINT64_C(1) << b;
        check_value(p - 1);
        check_value(p);
        check_value(p + 1);
    }
    cr_assert_eq(lt_hist_index((UINT64_C(1) << LT_HIST_MAX_BITS) - 1), LT_HIST_BUCKETS - 1);
    /* Beyond the range values clamp into the last bucket instead of overflowing the array. */
    cr_assert_eq(lt_hist_index(UINT64_MAX), LT_HIST_BUCKETS - 1);
}

Test(loadtest_histogram, buckets_are_contiguous_and_ordered, .timeout = 10)
{
    for (unsigned i = 1; i < LT_HIST_BUCKETS; i++)
        cr_assert_eq(lt_hist_bucket_low(i), lt_hist_bucket_high(i - 1) + 1, "gap before bucket %u", i);
}

Test(loadtest_histogram, quantiles_exact_below_128, .timeout = 10)
{
    lt_hist_init(&h1);
    for (uint64_t v = 1; v <= 100; v++)
        lt_hist_record(&h1, v);
    cr_assert_eq(h1.n, 100);
    cr_assert_eq(lt_hist_quantile(&h1, 0.50), 50);
    cr_assert_eq(lt_hist_quantile(&h1, 0.90), 90);
    cr_assert_eq(lt_hist_quantile(&h1, 0.99), 99);
    cr_assert_eq(lt_hist_quantile(&h1, 1.0), 100);
    cr_assert_eq(h1.min, 1);
    cr_assert_eq(h1.max, 100);
    cr_assert_float_eq(lt_hist_mean(&h1), 50.5, 1e-9);
}

Test(loadtest_histogram, quantiles_within_precision, .timeout = 10)
{
    lt_hist_init(&h1);
    for (uint64_t v = 1; v <= 100000; v++)
        lt_hist_record(&h1, v);
    uint64_t p50 = lt_hist_quantile(&h1, 0.50), p99 = lt_hist_quantile(&h1, 0.99);
    cr_assert(p50 >= 50000 && p50 <= 50000 + 50000 / 64, "p50 %llu", (unsigned long long)p50);
    cr_assert(p99 >= 99000 && p99 <= 99000 + 99000 / 64, "p99 %llu", (unsigned long long)p99);
    /* The bucket top is capped at the exact max. */
    cr_assert_eq(lt_hist_quantile(&h1, 0.99999), 100000);
}

Test(loadtest_histogram, empty_is_zero, .timeout = 10)
{
    lt_hist_init(&h1);
    cr_assert_eq(lt_hist_quantile(&h1, 0.5), 0);
    cr_assert_eq(lt_hist_quantile(&h1, 1.0), 0);
    cr_assert_float_eq(lt_hist_mean(&h1), 0.0, 1e-12);
}

Test(loadtest_histogram, merge_equals_recording_everything_once, .timeout = 10)
{
    lt_hist_init(&h1);
    lt_hist_init(&h2);
    lt_hist_init(&hall);
    for (uint64_t v = 3; v < 50000; v += 7) {
        lt_hist_record(v % 2 ? &h1 : &h2, v);
        lt_hist_record(&hall, v);
    }
    lt_hist_merge(&h1, &h2);
    cr_assert_eq(h1.n, hall.n);
    cr_assert_eq(h1.sum, hall.sum);
    cr_assert_eq(h1.min, hall.min);
    cr_assert_eq(h1.max, hall.max);
    for (unsigned i = 0; i < LT_HIST_BUCKETS; i++)
        cr_assert_eq(h1.counts[i], hall.counts[i], "bucket %u", i);
    cr_assert_eq(lt_hist_quantile(&h1, 0.9), lt_hist_quantile(&hall, 0.9));
}
