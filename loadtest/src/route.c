/* route.c - --route: which --url a claim goes to. rr keeps the connection's
 * (or thread's) URL; coupon picks the URL by a consistent hash of the
 * claim's coupon id, as HAProxy's `balance url_param coupon_id` with
 * `hash-type consistent` sends one coupon to one server.
 *
 * The hash is jump consistent hashing (Lamping and Veach, "A Fast, Minimal
 * Memory, Consistent Hash Algorithm", 2014) of the coupon id mixed by
 * splitmix64's finalizer: the same coupon always gets the same URL, coupons
 * spread evenly, and a URL added at the end of the list takes only its
 * 1/(n+1) share of the coupons from the others. It is not HAProxy's own
 * choice of server, only the same kind of choice. */
#include "loadtest.h"

#include <string.h>

/* splitmix64's finalizer: consecutive ids, as a fresh store numbers its
 * coupons, become unrelated 64-bit keys before the jump. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

size_t lt_route_coupon(int64_t coupon_id, size_t n_urls)
{
    uint64_t key = mix64((uint64_t)coupon_id);
    int64_t b = -1, j = 0;

    if (n_urls <= 1)
        return 0;
    /* Jump: each step draws the next bucket this key would move to as the
     * list grows; the last one below n_urls is its URL. */
    while (j < (int64_t)n_urls) {
        b = j;
        key = key * UINT64_C(2862933555777941757) + 1;
        j = (int64_t)((double)(b + 1) * ((double)(INT64_C(1) << 31) / (double)((key >> 33) + 1)));
    }
    return (size_t)b;
}

const char *lt_route_name(lt_route r)
{
    return r == LT_ROUTE_COUPON ? "coupon" : "rr";
}

int lt_route_parse(const char *name, lt_route *out)
{
    if (strcmp(name, "rr") == 0)
        *out = LT_ROUTE_RR;
    else if (strcmp(name, "coupon") == 0)
        *out = LT_ROUTE_COUPON;
    else
        return -1;
    return 0;
}
