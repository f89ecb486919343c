/* timeline.c - --timeline: the run cut into 250 ms buckets, so a stall, a
 * failover or a sell-out shows where it happened instead of being averaged
 * into one line. Each worker fills its own buckets (no sharing, no locks);
 * main merges them and writes the CSV. */
#include "loadtest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A log-linear latency histogram small enough for one per bucket. Values
 * below 2^SUB_BITS us are exact, then 2^SUB_BITS buckets per power of two
 * up to 2^MAX_BITS us (~4.8 h; longer is clamped). That is 496 uint32
 * counts, ~2 KB a bucket, ~8 KB per second of run per worker. */
#define TL_SUB_BITS 4
#define TL_SUB (1u << TL_SUB_BITS)
#define TL_MAX_BITS 34
#define TL_LAT_BUCKETS ((TL_MAX_BITS - TL_SUB_BITS + 1) * TL_SUB)
#define BUCKET_NS ((int64_t)LT_TIMELINE_BUCKET_MS * 1000000)

typedef struct tl_bucket {
    uint64_t answered, won, r1005, r1006, r1010, errors;
    uint32_t lat[TL_LAT_BUCKETS];
} tl_bucket;

struct lt_timeline {
    tl_bucket *b;   /* b[0..n) used, zeroed up to cap */
    size_t n, cap;
    uint64_t lost;  /* events that found no memory */
};

static unsigned lat_index(uint64_t us)
{
    unsigned top;
    if (us < TL_SUB)
        return (unsigned)us;
    if (us >= (UINT64_C(1) << TL_MAX_BITS))
        us = (UINT64_C(1) << TL_MAX_BITS) - 1;
    top = 63u - (unsigned)__builtin_clzll(us); /* highest set bit, >= TL_SUB_BITS */
    /* The SUB_BITS bits below the top one pick the slice of [2^top, 2^(top+1)). */
    return (top - TL_SUB_BITS + 1) * TL_SUB + (unsigned)((us >> (top - TL_SUB_BITS)) & (TL_SUB - 1));
}

/* The middle of bucket idx, in us. */
static double lat_mid(unsigned idx)
{
    unsigned group = idx / TL_SUB, sub = idx % TL_SUB;
    double low, width;
    if (group == 0)
        return (double)idx;
    width = (double)(UINT64_C(1) << (group - 1));
    low = (double)(UINT64_C(1) << (group - 1 + TL_SUB_BITS)) + sub * width;
    return low + width / 2;
}

/* Nearest rank, as cm_hist_quantile. */
static double lat_quantile_ms(const tl_bucket *b, double q)
{
    uint64_t rank, seen = 0;
    if (b->answered == 0)
        return 0;
    rank = (uint64_t)(q * (double)b->answered + 0.999999999);
    if (rank < 1)
        rank = 1;
    for (unsigned i = 0; i < TL_LAT_BUCKETS; i++) {
        seen += b->lat[i];
        if (seen >= rank)
            return lat_mid(i) / 1000.0;
    }
    return lat_mid(TL_LAT_BUCKETS - 1) / 1000.0;
}

lt_timeline *lt_timeline_new(void)
{
    return calloc(1, sizeof(lt_timeline));
}

void lt_timeline_free(lt_timeline *t)
{
    if (t == NULL)
        return;
    free(t->b);
    free(t);
}

/* The bucket of since_ns, growing the array to it; NULL when out of memory. */
static tl_bucket *bucket_at(lt_timeline *t, int64_t since_ns)
{
    size_t i = since_ns > 0 ? (size_t)(since_ns / BUCKET_NS) : 0;
    if (i >= t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        tl_bucket *nb;
        while (cap <= i)
            cap *= 2;
        nb = realloc(t->b, cap * sizeof *nb);
        if (nb == NULL)
            return NULL;
        memset(nb + t->cap, 0, (cap - t->cap) * sizeof *nb);
        t->b = nb;
        t->cap = cap;
    }
    if (i >= t->n)
        t->n = i + 1;
    return &t->b[i];
}

int lt_timeline_answer(lt_timeline *t, int64_t since_ns, int status, long code, uint64_t latency_us)
{
    tl_bucket *b = bucket_at(t, since_ns);
    if (b == NULL) {
        t->lost++;
        return -1;
    }
    b->answered++;
    b->lat[lat_index(latency_us)]++;
    if (code == 0)
        b->won++;
    /* The three 503s apart: lock busy, lock service down, lease ended. */
    if (status == 503 && code == 1005)
        b->r1005++;
    else if (status == 503 && code == 1006)
        b->r1006++;
    else if (status == 503 && code == 1010)
        b->r1010++;
    return 0;
}

int lt_timeline_error(lt_timeline *t, int64_t since_ns)
{
    tl_bucket *b = bucket_at(t, since_ns);
    if (b == NULL) {
        t->lost++;
        return -1;
    }
    b->errors++;
    return 0;
}

int lt_timeline_merge(lt_timeline *dst, const lt_timeline *src)
{
    dst->lost += src->lost;
    if (src->n > 0 && bucket_at(dst, (int64_t)(src->n - 1) * BUCKET_NS) == NULL)
        return -1;
    for (size_t i = 0; i < src->n; i++) {
        tl_bucket *d = &dst->b[i];
        const tl_bucket *s = &src->b[i];
        d->answered += s->answered;
        d->won += s->won;
        d->r1005 += s->r1005;
        d->r1006 += s->r1006;
        d->r1010 += s->r1010;
        d->errors += s->errors;
        for (unsigned k = 0; k < TL_LAT_BUCKETS; k++)
            d->lat[k] += s->lat[k];
    }
    return 0;
}

int lt_timeline_write_csv(const lt_timeline *t, FILE *f, char *err, size_t errlen)
{
    if (t->lost > 0)
        return cm_fail(err, errlen, "timeline: %" PRIu64 " events lost (out of memory)", t->lost);
    fprintf(f, "t_ms,answered,won,503_1005,503_1006,503_1010,errors,p50_ms,p99_ms\n");
    for (size_t i = 0; i < t->n; i++) {
        const tl_bucket *b = &t->b[i];
        fprintf(f, "%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64,
                i * LT_TIMELINE_BUCKET_MS, b->answered, b->won, b->r1005, b->r1006, b->r1010, b->errors);
        /* A bucket with no answer has no latency: empty fields, not a 0 that
         * would read as "fast". */
        if (b->answered > 0)
            fprintf(f, ",%.3f,%.3f\n", lat_quantile_ms(b, 0.50), lat_quantile_ms(b, 0.99));
        else
            fprintf(f, ",,\n");
    }
    if (fflush(f) != 0 || ferror(f))
        return cm_fail(err, errlen, "timeline: cannot write: %s", strerror(errno));
    return 0;
}
