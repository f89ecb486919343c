/* spread.c - the many-coupon sale (--coupons, uniform or --zipf) and the
 * bundle load (--bundle K): closed-loop workers, one keep-alive curl handle
 * each, and the audit of every coupon plus, for bundles, every answer
 * against the records in the database:
 *
 *   per coupon   the single-coupon audit (audit.c) on each coupon, with the
 *                successes that named it: oversold, stock and records
 *                disagreeing, users over the limit, a success lost or
 *                invented, servers disagreeing with the DB;
 *   per bundle   (distinct users, --db) each request's records: a 200 must
 *                have all K, in the DB, with the record ids it answered;
 *                any other answer none; a transport error all or none.
 *                Anything between is a partial bundle.
 *
 * Each of the --connections (default --threads) is a thread of its own
 * sending one request at a time: simpler than worker.c's epoll loops, and
 * the rates here compare locks with each other, not with the HTTP ceiling.
 * With --route rr a thread keeps to one URL (thread i to URL i mod n); with
 * --route coupon each claim goes to its coupon's URL (route.c), so a thread
 * keeps a keep-alive handle per URL.
 */
#include "loadtest.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#define SP_BODY_MAX 8192

/* One bundle request and what it was answered, for the bundle audit. */
typedef struct sp_req {
    uint64_t ticket;
    long code;                       /* the JSON code; SP_TRANSPORT when no answer came */
    unsigned k;
    int64_t ids[LT_BUNDLE_MAX];      /* as sent */
    int64_t recs[LT_BUNDLE_MAX];     /* a 200's record_ids, in the same order */
} sp_req;

#define SP_TRANSPORT (-100000L)

typedef struct sp_shared {
    const lt_options *opt;
    double *cdf;                     /* --zipf: cumulative weights, last = 1; NULL = uniform */
    atomic_uint_fast64_t next_ticket;
    int64_t deadline_ns;             /* 0 = none */
    char user_tag[40];
    uint64_t seed;
} sp_shared;

typedef struct sp_thread {
    sp_shared *sh;
    unsigned index;
    pthread_t tid;
    int started;
    lt_stats stats;
    uint64_t *won;                   /* per coupon (index into opt->coupon_ids): successes naming it */
    uint64_t bad_ok;                 /* 200s whose body lacked the K record ids */
    sp_req *reqs;                    /* bundle requests (kept for the audit) */
    size_t n_reqs, cap_reqs;
    uint64_t rng;
    char err[LT_ERR_MAX];
    int failed;
} sp_thread;

typedef struct sp_buf {
    char data[SP_BODY_MAX];
    size_t len;
} sp_buf;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    sp_buf *b = arg;
    size_t len = size * n, room = sizeof b->data - 1 - b->len;
    /* A longer body is cut, not refused: its JSON then fails to parse and
     * the answer counts as malformed. */
    memcpy(b->data + b->len, p, len < room ? len : room);
    b->len += len < room ? len : room;
    b->data[b->len] = '\0';
    return len;
}

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64*: per thread, no lock. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static size_t pick(sp_thread *t)
{
    const lt_options *o = t->sh->opt;
    uint64_t r = next_rand(&t->rng);

    if (t->sh->cdf == NULL)
        return (size_t)(r % o->n_coupons);
    double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) from 53 bits */
    size_t lo = 0, hi = o->n_coupons - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->sh->cdf[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* K distinct coupons, in random order. */
static void pick_bundle(sp_thread *t, size_t *idx, unsigned k)
{
    const lt_options *o = t->sh->opt;
    for (unsigned i = 0; i < k; i++) {
        size_t c = 0;
        int fresh = 0;
        /* Draw by the distribution; a steep --zipf may keep drawing the hot
         * few, so after a bounded number of tries take any coupon not yet in. */
        for (int tries = 0; !fresh; tries++) {
            c = tries < 64 ? pick(t) : (size_t)(next_rand(&t->rng) % o->n_coupons);
            fresh = 1;
            for (unsigned j = 0; j < i; j++)
                if (idx[j] == c)
                    fresh = 0;
        }
        idx[i] = c;
    }
    for (unsigned i = k - 1; i > 0; i--) {
        unsigned j = (unsigned)(next_rand(&t->rng) % (i + 1));
        size_t tmp = idx[i];
        idx[i] = idx[j];
        idx[j] = tmp;
    }
}

static int keep_req(sp_thread *t, const sp_req *r)
{
    if (t->n_reqs == t->cap_reqs) {
        size_t cap = t->cap_reqs ? t->cap_reqs * 2 : 1024;
        sp_req *grown = realloc(t->reqs, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        t->reqs = grown;
        t->cap_reqs = cap;
    }
    t->reqs[t->n_reqs++] = *r;
    return 0;
}

/* A 200 of a bundle: data.coupon_ids as sent and K record ids. */
static int read_bundle_ok(json_t *data, sp_req *r)
{
    json_t *ids = json_object_get(data, "coupon_ids"), *recs = json_object_get(data, "record_ids");
    if (!json_is_array(ids) || !json_is_array(recs) || json_array_size(ids) != r->k || json_array_size(recs) != r->k)
        return -1;
    for (unsigned i = 0; i < r->k; i++) {
        json_t *id = json_array_get(ids, i), *rec = json_array_get(recs, i);
        if (!json_is_integer(id) || json_integer_value(id) != r->ids[i] || !json_is_integer(rec) ||
            json_integer_value(rec) <= 0)
            return -1;
        r->recs[i] = json_integer_value(rec);
    }
    return 0;
}

/* The thread's keep-alive handle to URL u, made on first use: under --route
 * rr a thread only ever uses one. NULL after t->err is set. */
static CURL *handle_for(sp_thread *t, CURL **hs, size_t u, sp_buf *body)
{
    const lt_options *o = t->sh->opt;
    CURL *h = hs[u];

    if (h != NULL)
        return h;
    if ((h = curl_easy_init()) == NULL) {
        snprintf(t->err, sizeof t->err, "worker %u: out of memory", t->index);
        return NULL;
    }
    if (curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK || curl_easy_setopt(h, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "") != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(h, CURLOPT_WRITEDATA, body) != CURLE_OK) {
        snprintf(t->err, sizeof t->err, "worker %u: curl_easy_setopt failed", t->index);
        curl_easy_cleanup(h);
        return NULL;
    }
    hs[u] = h;
    return h;
}

static void *thread_main(void *arg)
{
    sp_thread *t = arg;
    const lt_options *o = t->sh->opt;
    CURL **hs = calloc(o->n_urls, sizeof *hs);
    sp_buf *body = malloc(sizeof *body);
    char url[1024], user[LT_USER_MAX + 1], list[LT_BUNDLE_MAX * 21];

    if (hs == NULL || body == NULL) {
        snprintf(t->err, sizeof t->err, "worker %u: out of memory", t->index);
        t->failed = 1;
        goto out;
    }
    for (;;) {
        uint64_t ticket = atomic_fetch_add_explicit(&t->sh->next_ticket, 1, memory_order_relaxed);
        size_t idx[LT_BUNDLE_MAX];
        unsigned k = o->bundle ? o->bundle : 1;
        sp_req r;

        if ((o->requests > 0 && ticket >= o->requests) || (t->sh->deadline_ns && cm_now_ns() >= t->sh->deadline_ns))
            break;
        if (o->users > 0)
            snprintf(user, sizeof user, "%s%" PRIu64, o->user_prefix ? o->user_prefix : "u",
                     next_rand(&t->rng) % o->users);
        else
            snprintf(user, sizeof user, "%s%" PRIu64, t->sh->user_tag, ticket);
        memset(&r, 0, sizeof r);
        r.ticket = ticket;
        r.k = k;
        if (!o->bundle) {
            idx[0] = pick(t);
            r.ids[0] = o->coupon_ids[idx[0]];
        }
        /* Options refuse --route coupon with --bundle: a bundle keeps rr. */
        size_t u = o->route == LT_ROUTE_COUPON ? lt_route_coupon(r.ids[0], o->n_urls) : t->index % o->n_urls;
        const char *base = o->urls[u];
        CURL *h = handle_for(t, hs, u, body);
        if (h == NULL) {
            t->failed = 1;
            break;
        }
        if (o->bundle) {
            size_t off = 0;
            pick_bundle(t, idx, k);
            for (unsigned i = 0; i < k; i++) {
                r.ids[i] = o->coupon_ids[idx[i]];
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%" PRId64, i ? "," : "", r.ids[i]);
            }
            snprintf(url, sizeof url, "%s/api/v1/coupon/bundle?user_id=%s&coupon_ids=%s", base, user, list);
        } else {
            snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%" PRId64 "&user_id=%s", base, r.ids[0],
                     user);
        }
        body->len = 0;
        body->data[0] = '\0';
        int64_t t0 = cm_now_ns();
        CURLcode cc = curl_easy_setopt(h, CURLOPT_URL, url);
        if (cc == CURLE_OK)
            cc = curl_easy_perform(h);
        if (cc != CURLE_OK) {
            t->stats.errors++;
            if ((unsigned)cc < LT_CURL_SLOTS)
                t->stats.errors_by_curl[cc]++;
            r.code = SP_TRANSPORT;
        } else {
            long status = 0;
            (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
            cm_hist_record(&t->stats.hist, (uint64_t)((cm_now_ns() - t0) / 1000));
            t->stats.answered++;
            if (status >= 0 && status < LT_STATUS_SLOTS)
                t->stats.by_status[status]++;
            json_t *root = json_loads(body->data, 0, NULL);
            json_t *code = json_object_get(root, "code");
            r.code = json_is_integer(code) ? (long)json_integer_value(code) : LT_CODE_MISSING;
            lt_stats_add_code(&t->stats, r.code, 1);
            if (r.code == 0) {
                t->stats.successes++;
                json_t *data = json_object_get(root, "data");
                if (o->bundle && read_bundle_ok(data, &r) != 0)
                    t->bad_ok++;
                /* A 200 says every coupon it names was issued: counted so,
                 * and the DB must agree. */
                for (unsigned i = 0; i < k; i++)
                    t->won[idx[i]]++;
            }
            json_decref(root);
        }
        if (o->bundle && keep_req(t, &r) != 0) {
            snprintf(t->err, sizeof t->err, "worker %u: out of memory", t->index);
            t->failed = 1;
            break;
        }
    }
out:
    for (size_t u = 0; hs != NULL && u < o->n_urls; u++)
        curl_easy_cleanup(hs[u]);
    free(hs);
    free(body);
    return NULL;
}

/* The per-coupon audits' results. */
typedef struct sp_verdict {
    int64_t oversold_by;       /* largest excess over every coupon */
    size_t oversold_coupons;
    int64_t users_over;        /* users over a per-user limit, over every coupon (DB) */
    int incomplete;
    int64_t stock_left;
    uint64_t partial;          /* bundles with some but not all records */
    uint64_t unbacked_ok;      /* 200s without their K records in the DB */
    uint64_t untold;           /* whole bundles in the DB answered with an error */
    int bundle_checked;        /* the per-request check ran (distinct users and --db) */
    char findings[12][256];
    size_t n_findings;
} sp_verdict;

static void note(sp_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(sp_verdict *v, const char *fmt, ...)
{
    va_list ap;
    if (v->n_findings >= sizeof v->findings / sizeof v->findings[0])
        return;
    va_start(ap, fmt);
    vsnprintf(v->findings[v->n_findings++], sizeof v->findings[0], fmt, ap);
    va_end(ap);
}

typedef struct sp_before {
    lt_coupon_view http;       /* first URL */
    lt_coupon_view db;
} sp_before;

static int read_before(const lt_options *o, lt_db *db, sp_before *b)
{
    for (size_t c = 0; c < o->n_coupons; c++) {
        for (size_t u = 0; u < o->n_urls; u++) {
            lt_coupon_view v;
            if (lt_coupon_http_read(o->urls[u], o->coupon_ids[c], o->timeout_ms, &v) != 0) {
                fprintf(stderr, "coupon-loadtest: %s\n", v.err);
                return -1;
            }
            if (u == 0)
                b[c].http = v;
        }
        if (db != NULL && lt_db_read(db, o->coupon_ids[c], &b[c].db) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", b[c].db.err);
            return -1;
        }
    }
    return 0;
}

static void audit_coupons(const lt_options *o, lt_db *db, const sp_before *b, const uint64_t *won,
                          uint64_t errors, sp_verdict *v)
{
    lt_coupon_view *after = calloc(o->n_urls, sizeof *after);
    if (after == NULL) {
        v->incomplete = 1;
        return;
    }
    for (size_t c = 0; c < o->n_coupons; c++) {
        lt_audit a;
        memset(&a, 0, sizeof a);
        a.coupon_id = o->coupon_ids[c];
        a.before = b[c].http;
        a.after = after;
        a.n_after = o->n_urls;
        for (size_t u = 0; u < o->n_urls; u++)
            if (lt_coupon_http_read(o->urls[u], a.coupon_id, o->timeout_ms, &after[u]) != 0)
                fprintf(stderr, "coupon-loadtest: audit: %s\n", after[u].err);
        if (db != NULL) {
            a.have_db = 1;
            a.db_before = b[c].db;
            if (lt_db_read(db, a.coupon_id, &a.db_after) != 0)
                fprintf(stderr, "coupon-loadtest: audit: %s\n", a.db_after.err);
            v->users_over += a.db_after.users_over_limit;
        }
        a.successes_seen = won[c];
        a.transport_errors = errors;
        lt_audit_evaluate(&a);
        const lt_coupon_view *now = db != NULL ? &a.db_after : &after[0];
        if (now->ok)
            v->stock_left += now->stock;
        v->incomplete |= a.incomplete;
        if (a.oversold_by > 0) {
            v->oversold_coupons++;
            if (a.oversold_by > v->oversold_by)
                v->oversold_by = a.oversold_by;
            for (size_t f = 0; f < a.n_findings; f++)
                note(v, "coupon %" PRId64 ": %s", a.coupon_id, a.findings[f].what);
        }
    }
    free(after);
}

static int by_ticket(const void *a, const void *b)
{
    const sp_req *x = *(const sp_req *const *)a, *y = *(const sp_req *const *)b;
    return x->ticket < y->ticket ? -1 : x->ticket > y->ticket;
}

/* The index in sorted of the request with this ticket, or n. */
static size_t find_req(const sp_req *const *sorted, size_t n, uint64_t ticket)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid]->ticket < ticket)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo]->ticket == ticket ? lo : n;
}

/* Every request's records against its answer (distinct users only: the
 * user id names the request). */
static void audit_bundles(const lt_options *o, lt_db *db, const char *tag, sp_thread *th, sp_verdict *v)
{
    lt_record *recs = NULL;
    size_t n_recs = 0, n_reqs = 0, k = 0;
    const sp_req **sorted = NULL;
    unsigned *count = NULL;
    unsigned char *matched = NULL;
    char err[LT_ERR_MAX];
    size_t tag_len = strlen(tag);

    for (unsigned i = 0; i < o->connections; i++)
        n_reqs += th[i].n_reqs;
    sorted = calloc(n_reqs ? n_reqs : 1, sizeof *sorted);
    count = calloc(n_reqs ? n_reqs : 1, sizeof *count);
    matched = calloc(n_reqs ? n_reqs : 1, LT_BUNDLE_MAX);
    if (sorted == NULL || count == NULL || matched == NULL) {
        v->incomplete = 1;
        goto out;
    }
    if (lt_db_records(db, tag, &recs, &n_recs, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: audit: %s\n", err);
        v->incomplete = 1;
        goto out;
    }
    for (unsigned i = 0; i < o->connections; i++)
        for (size_t j = 0; j < th[i].n_reqs; j++)
            sorted[k++] = &th[i].reqs[j];
    qsort(sorted, n_reqs, sizeof *sorted, by_ticket);
    v->bundle_checked = 1;
    for (size_t i = 0; i < n_recs; i++) {
        char *end = NULL;
        uint64_t ticket = strtoull(recs[i].user_id + tag_len, &end, 10);
        size_t pos = end != recs[i].user_id + tag_len && *end == '\0' ? find_req(sorted, n_reqs, ticket) : n_reqs;
        if (pos == n_reqs) {
            v->untold++;
            note(v, "record %" PRId64 " of user %s: no request of this run", recs[i].id, recs[i].user_id);
            continue;
        }
        const sp_req *r = sorted[pos];
        int in = 0;
        for (unsigned j = 0; j < r->k; j++) {
            if (r->ids[j] == recs[i].coupon_id) {
                in = 1;
                if (r->code == 0 && r->recs[j] == recs[i].id)
                    matched[pos * LT_BUNDLE_MAX + j] = 1;
            }
        }
        if (!in)
            note(v, "record %" PRId64 " of user %s is for coupon %" PRId64 ", not in its bundle", recs[i].id,
                 recs[i].user_id, recs[i].coupon_id);
        count[pos] += in ? 1 : 1000; /* a foreign coupon makes the bundle wrong whatever the count */
    }
    for (size_t i = 0; i < n_reqs; i++) {
        const sp_req *r = sorted[i];
        unsigned got = count[i];
        if (got != 0 && got != r->k) {
            v->partial++;
            note(v, "user %s%" PRIu64 ": %u record(s) of a bundle of %u (answered %ld)", tag, r->ticket,
                 got % 1000, r->k, r->code);
            continue;
        }
        if (r->code == 0) {
            unsigned ok = 0;
            for (unsigned j = 0; j < r->k; j++)
                ok += matched[i * LT_BUNDLE_MAX + j];
            if (ok != r->k) {
                v->unbacked_ok++;
                note(v, "user %s%" PRIu64 ": answered 200 but %u of its %u record ids are in the DB", tag, r->ticket,
                     ok, r->k);
            }
        } else if (r->code != SP_TRANSPORT && got == r->k) {
            v->untold++;
            note(v, "user %s%" PRIu64 ": the whole bundle is in the DB but was answered %ld", tag, r->ticket, r->code);
        }
    }
out:
    free(recs);
    free(sorted);
    free(count);
    free(matched);
}

static double *zipf_cdf(size_t n, double s)
{
    double *cdf = malloc(n * sizeof *cdf), sum = 0;
    if (cdf == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        sum += 1.0 / pow((double)(i + 1), s);
        cdf[i] = sum;
    }
    for (size_t i = 0; i < n; i++)
        cdf[i] /= sum;
    cdf[n - 1] = 1.0;
    return cdf;
}

static const char *verdict_of(const sp_verdict *v, int stuck, char *buf, size_t len)
{
    if (v->oversold_by > 0)
        snprintf(buf, len, "OVERSOLD by %" PRId64, v->oversold_by);
    else if (v->partial + v->unbacked_ok + v->untold > 0)
        snprintf(buf, len, "PARTIAL BUNDLES %" PRIu64, v->partial + v->unbacked_ok + v->untold);
    else if (v->incomplete)
        snprintf(buf, len, "INCOMPLETE AUDIT");
    else if (stuck)
        snprintf(buf, len, "STUCK");
    else
        snprintf(buf, len, "NO OVERSELL");
    return buf;
}

static void report(FILE *f, const lt_options *o, const lt_stats *s, double elapsed, const sp_verdict *v,
                   uint64_t units, const char *verdict, uint64_t bad_ok)
{
    double rate = elapsed > 0 ? (double)s->answered / elapsed : 0;
    double ms[4] = {cm_hist_quantile(&s->hist, 0.50) / 1000.0, cm_hist_quantile(&s->hist, 0.90) / 1000.0,
                    cm_hist_quantile(&s->hist, 0.99) / 1000.0, cm_hist_quantile(&s->hist, 1.0) / 1000.0};
    uint64_t c1005 = 0;
    for (size_t i = 0; i < s->n_codes; i++)
        if (s->codes[i].code == 1005)
            c1005 = s->codes[i].count;
    if (o->json) {
        json_t *codes = json_object(), *fs = json_array();
        for (size_t i = 0; i < s->n_codes; i++) {
            char key[24];
            snprintf(key, sizeof key, "%ld", s->codes[i].code);
            json_object_set_new(codes, key, json_integer((json_int_t)s->codes[i].count));
        }
        for (size_t i = 0; i < v->n_findings; i++)
            json_array_append_new(fs, json_string(v->findings[i]));
        json_t *root = json_pack(
            "{s:I,s:f,s:I,s:s,s:I,s:f,s:f,s:{s:f,s:f,s:f,s:f},s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:s,s:o}",
            "coupons", (json_int_t)o->n_coupons, "zipf", o->zipf, "bundle", (json_int_t)o->bundle, "route",
            lt_route_name(o->route), "answered",
            (json_int_t)s->answered, "elapsed_s", elapsed, "throughput", rate, "latency_ms", "p50", ms[0], "p90",
            ms[1], "p99", ms[2], "max", ms[3], "codes", codes, "transport_errors", (json_int_t)s->errors,
            "lock_timeouts", (json_int_t)c1005, "successes", (json_int_t)s->successes, "units_issued",
            (json_int_t)units, "partial_bundles", (json_int_t)(v->partial + v->unbacked_ok + bad_ok),
            "untold_bundles", (json_int_t)v->untold, "oversold_coupons", (json_int_t)v->oversold_coupons,
            "oversold_by", (json_int_t)v->oversold_by, "bundle_checked", v->bundle_checked, "verdict", verdict,
            "findings", fs);
        if (root != NULL)
            json_dumpf(root, f, JSON_COMPACT);
        fputc('\n', f);
        json_decref(root);
        return;
    }
    fprintf(f, "spread:     %zu coupons (%s)", o->n_coupons, o->zipf > 0 ? "zipf" : "uniform");
    if (o->zipf > 0)
        fprintf(f, " s=%g", o->zipf);
    if (o->bundle)
        fprintf(f, ", bundles of %u", o->bundle);
    fprintf(f, ", %zu URL(s), route %s", o->n_urls, lt_route_name(o->route));
    fprintf(f, "\nrequests:   %" PRIu64 " answered, %" PRIu64 " transport errors in %.2f s: %.0f req/s\n", s->answered,
            s->errors, elapsed, rate);
    fprintf(f, "latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", ms[0], ms[1], ms[2], ms[3]);
    fprintf(f, "answers:   ");
    for (size_t i = 0; i < s->n_codes; i++)
        fprintf(f, " code %ld: %" PRIu64, s->codes[i].code, s->codes[i].count);
    fprintf(f, "\nissued:     %" PRIu64 " units in %" PRIu64 " successes\n", units, s->successes);
    if (o->bundle)
        fprintf(f, "bundles:    %" PRIu64 " issued, %" PRIu64 " partial, %" PRIu64
                " 200s without all their records, %" PRIu64 " whole but answered an error%s\n",
                s->successes, v->partial, v->unbacked_ok + bad_ok, v->untold,
                v->bundle_checked ? "" : " (per-bundle check skipped: needs --db and distinct users)");
    fprintf(f, "coupons:    %zu of %zu oversold; users over a limit: %" PRId64 "\n", v->oversold_coupons, o->n_coupons,
            v->users_over);
    for (size_t i = 0; i < v->n_findings; i++)
        fprintf(f, "  finding:  %s\n", v->findings[i]);
    fprintf(f, "verdict:    %s\n", verdict);
}

int lt_spread_main(const lt_options *o)
{
    sp_shared sh;
    sp_thread *th = NULL;
    sp_before *before = NULL;
    lt_db *db = NULL;
    lt_stats *total = NULL;
    uint64_t *won = NULL;
    sp_verdict v;
    char err[LT_ERR_MAX] = "", verdict[64];
    int rc = LT_EXIT_USAGE;

    memset(&sh, 0, sizeof sh);
    memset(&v, 0, sizeof v);
    sh.opt = o;
    atomic_init(&sh.next_ticket, 0);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "coupon-loadtest: curl_global_init failed\n");
        return LT_EXIT_USAGE;
    }
    th = calloc(o->connections, sizeof *th);
    before = calloc(o->n_coupons, sizeof *before);
    total = malloc(sizeof *total);
    won = calloc(o->n_coupons, sizeof *won);
    if (th == NULL || before == NULL || total == NULL || won == NULL ||
        (o->zipf > 0 && (sh.cdf = zipf_cdf(o->n_coupons, o->zipf)) == NULL)) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        goto out;
    }
    if (o->db_path != NULL && lt_db_open(o->db_path, &db, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: %s\n", err);
        goto out;
    }
    if (read_before(o, db, before) != 0)
        goto out;
    {
        uint64_t seed = o->seed;
        if (seed == 0)
            seed = (uint64_t)cm_now_ns() ^ ((uint64_t)getpid() << 32);
        sh.seed = seed;
        /* Distinct users per request AND per run (main.c's reason). */
        snprintf(sh.user_tag, sizeof sh.user_tag, "lt%08" PRIx64 "-", (uint64_t)((seed * 0x9E3779B97F4A7C15ULL) >> 32));
    }
    if (!o->quiet)
        fprintf(stderr,
                "coupon-loadtest: %zu coupons (%" PRId64 "..%" PRId64 ")%s, %u connections, %zu URL(s), route %s\n",
                o->n_coupons, o->coupon_ids[0], o->coupon_ids[o->n_coupons - 1], o->bundle ? ", bundles" : "",
                o->connections, o->n_urls, lt_route_name(o->route));
    int64_t t0 = cm_now_ns();
    if (o->duration_s > 0)
        sh.deadline_ns = t0 + (int64_t)(o->duration_s * 1e9);
    unsigned started = 0;
    for (unsigned i = 0; i < o->connections; i++) {
        th[i].sh = &sh;
        th[i].index = i;
        th[i].rng = sh.seed + 0x9E3779B97F4A7C15ULL * (i + 1);
        lt_stats_init(&th[i].stats);
        th[i].won = calloc(o->n_coupons, sizeof *th[i].won);
        if (th[i].won == NULL || pthread_create(&th[i].tid, NULL, thread_main, &th[i]) != 0) {
            fprintf(stderr, "coupon-loadtest: cannot start worker %u\n", i);
            /* The started ones stop at once: no ticket is left for them. */
            atomic_store(&sh.next_ticket, UINT64_MAX / 2);
            sh.deadline_ns = 1;
            break;
        }
        th[i].started = 1;
        started++;
    }
    for (unsigned i = 0; i < o->connections; i++)
        if (th[i].started)
            pthread_join(th[i].tid, NULL);
    double elapsed = (double)(cm_now_ns() - t0) / 1e9;
    if (started < o->connections)
        goto out;
    lt_stats_init(total);
    uint64_t bad_ok = 0, units = 0;
    for (unsigned i = 0; i < o->connections; i++) {
        if (th[i].failed)
            fprintf(stderr, "coupon-loadtest: %s\n", th[i].err);
        lt_stats_merge(total, &th[i].stats);
        bad_ok += th[i].bad_ok;
        for (size_t c = 0; c < o->n_coupons; c++)
            won[c] += th[i].won[c];
    }
    for (size_t c = 0; c < o->n_coupons; c++)
        units += won[c];
    audit_coupons(o, db, before, won, total->errors, &v);
    if (o->bundle && db != NULL && o->users == 0)
        audit_bundles(o, db, sh.user_tag, th, &v);
    uint64_t c1005 = 0;
    for (size_t i = 0; i < total->n_codes; i++)
        if (total->codes[i].code == 1005)
            c1005 = total->codes[i].count;
    int stuck = total->successes == 0 && total->answered > 0 && c1005 == total->answered && v.stock_left > 0;
    verdict_of(&v, stuck, verdict, sizeof verdict);
    if (bad_ok > 0 && v.oversold_by == 0 && v.partial + v.unbacked_ok + v.untold == 0)
        snprintf(verdict, sizeof verdict, "PARTIAL BUNDLES %" PRIu64, bad_ok);
    report(stdout, o, total, elapsed, &v, units, verdict, bad_ok);
    if (v.oversold_by > 0 || v.partial + v.unbacked_ok + v.untold + bad_ok > 0)
        rc = LT_EXIT_OVERSOLD;
    else if (v.incomplete)
        rc = LT_EXIT_USAGE;
    else if (stuck)
        rc = LT_EXIT_STUCK;
    else
        rc = LT_EXIT_OK;
out:
    for (unsigned i = 0; th != NULL && i < o->connections; i++) {
        free(th[i].won);
        free(th[i].reqs);
    }
    free(th);
    free(before);
    free(total);
    free(won);
    free(sh.cdf);
    lt_db_close(db);
    curl_global_cleanup();
    return rc;
}
