/* stats.c - the per-thread counters of the load (HTTP status, JSON code,
 * transport errors, latency histogram), merging them, and reading "code"
 * from a reply body without a JSON parser. */
#include "loadtest.h"

#include <string.h>

void lt_stats_init(lt_stats *s)
{
    memset(s, 0, sizeof *s);
    lt_stats_init_zeroed(s);
}

void lt_stats_init_zeroed(lt_stats *s)
{
    /* Only the fields that do not start at zero: the bucket arrays are left
     * untouched, so calloc's fresh pages are not faulted in for buckets
     * that never see a sample (~180 KB per lt_stats, two per worker). */
    s->hist.min = UINT64_MAX;
    for (size_t i = 0; i < LT_OUT_COUNT; i++)
        s->by_outcome[i].min = UINT64_MAX;
}

const char *lt_outcome_name(lt_outcome o)
{
    static const char *const names[LT_OUT_COUNT] = {"won", "sold_out", "503", "other"};
    return (unsigned)o < LT_OUT_COUNT ? names[o] : "other";
}

lt_outcome lt_outcome_of(int status, long code)
{
    /* The status first: a 503 is the lock's answer whatever its body says. */
    if (status == 503)
        return LT_OUT_503;
    /* Code 0 whatever the status, as the audit counts successes. */
    if (code == 0)
        return LT_OUT_WON;
    if (code == 1003)
        return LT_OUT_SOLD_OUT;
    return LT_OUT_OTHER;
}

void lt_stats_add_code(lt_stats *s, long code, uint64_t n)
{
    if (code == 0)
        s->successes += n;
    for (size_t i = 0; i < s->n_codes; i++) {
        if (s->codes[i].code == code) {
            s->codes[i].count += n;
            return;
        }
    }
    if (s->n_codes < LT_CODE_SLOTS) {
        s->codes[s->n_codes].code = code;
        s->codes[s->n_codes].count = n;
        s->n_codes++;
        return;
    }
    s->code_other += n;
}

void lt_stats_merge(lt_stats *dst, const lt_stats *src)
{
    /* An empty histogram is skipped, not added: reading its 35 KB of
     * buckets would fault in pages that were never written (a worker's
     * warm-up stats without --warmup, the outcomes it never saw). */
    if (src->hist.n > 0)
        cm_hist_merge(&dst->hist, &src->hist);
    for (size_t i = 0; i < LT_OUT_COUNT; i++)
        if (src->by_outcome[i].n > 0)
            cm_hist_merge(&dst->by_outcome[i], &src->by_outcome[i]);
    dst->answered += src->answered;
    for (size_t i = 0; i < LT_STATUS_SLOTS; i++)
        dst->by_status[i] += src->by_status[i];
    dst->status_other += src->status_other;
    /* successes are re-derived from the code-0 entry by lt_stats_add_code. */
    for (size_t i = 0; i < src->n_codes; i++)
        lt_stats_add_code(dst, src->codes[i].code, src->codes[i].count);
    dst->code_other += src->code_other;
    dst->errors += src->errors;
    dst->connect_attempts += src->connect_attempts;
    dst->connect_failures += src->connect_failures;
    dst->gave_up += src->gave_up;
    dst->unsent += src->unsent;
    for (size_t i = 0; i < LT_CURL_SLOTS; i++) {
        dst->errors_by_curl[i] += src->errors_by_curl[i];
        dst->connect_by_curl[i] += src->connect_by_curl[i];
    }
}

/* memmem is a GNU extension; the key starts with '"', so memchr finds candidates. */
static const char *find_key(const char *p, const char *end, const char *key, size_t klen)
{
    while ((size_t)(end - p) >= klen) {
        const char *q = memchr(p, key[0], (size_t)(end - p) - klen + 1);
        if (q == NULL)
            return NULL;
        if (memcmp(q, key, klen) == 0)
            return q;
        p = q + 1;
    }
    return NULL;
}

long lt_scan_code(const char *body, size_t len)
{
    static const char key[] = "\"code\"";
    const size_t klen = sizeof key - 1;
    const char *p = body;
    const char *end = body + len;
    while ((size_t)(end - p) >= klen) {
        const char *hit = find_key(p, end, key, klen);
        const char *q;
        long v = 0;
        int neg = 0, digits = 0;
        if (hit == NULL)
            return LT_CODE_MISSING;
        p = hit + klen;
        /* Inside a JSON string a quote is always escaped (\"), so an unescaped
         * "code" followed by ':' is a key, not text in the msg. */
        if (hit > body && hit[-1] == '\\')
            continue;
        q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q >= end || *q != ':')
            continue;
        q++;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q < end && *q == '-') {
            neg = 1;
            q++;
        }
        while (q < end && *q >= '0' && *q <= '9' && digits < 9) {
            v = v * 10 + (*q - '0');
            q++;
            digits++;
        }
        if (digits == 0 || (q < end && *q >= '0' && *q <= '9'))
            return LT_CODE_MISSING;
        return neg ? -v : v;
    }
    return LT_CODE_MISSING;
}
