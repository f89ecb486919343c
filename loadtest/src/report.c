/* report.c - the end-of-run report: throughput, latency percentiles,
 * responses by status and code, errors, the audit and the verdict, as text
 * or as one JSON object (--json). */
#include "loadtest.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

const char *lt_verdict(const lt_audit *a, char *buf, size_t len)
{
    /* An oversell found anywhere wins; missing sources only block a clean bill. */
    if (a->oversold_by > 0)
        snprintf(buf, len, "OVERSOLD by %" PRId64, a->oversold_by);
    else if (a->incomplete)
        snprintf(buf, len, "AUDIT INCOMPLETE");
    else if (a->stuck)
        snprintf(buf, len, "STUCK");
    else
        snprintf(buf, len, "NO OVERSELL");
    return buf;
}

static int code_cmp(const void *x, const void *y)
{
    const lt_code_count *a = x, *b = y;
    return a->code < b->code ? -1 : a->code > b->code;
}

/* Codes in ascending order: the merge order of threads must not shuffle the report. */
static void sorted_codes(const lt_stats *st, lt_code_count *out)
{
    memcpy(out, st->codes, st->n_codes * sizeof *out);
    qsort(out, st->n_codes, sizeof *out, code_cmp);
}

/* Answers per second: a refused connect or a reset is not served load, and
 * counting it made a dead server look fast. */
static double throughput(const lt_summary *s)
{
    return s->elapsed_s > 0 ? (double)s->stats->answered / s->elapsed_s : 0.0;
}

static const double pcts[] = {0.50, 0.90, 0.99, 0.999};
static const char *const pct_names[] = {"p50", "p90", "p99", "p99.9"};
#define N_PCTS (sizeof pcts / sizeof pcts[0])

static double ms(uint64_t us)
{
    return (double)us / 1000.0;
}

/* The view the audit trusts most for "issued": the DB, else the first server. */
static const lt_coupon_view *final_view(const lt_audit *a)
{
    if (a->have_db && a->db_after.ok)
        return &a->db_after;
    if (a->n_after > 0 && a->after[0].ok)
        return &a->after[0];
    return NULL;
}

static void text_view(FILE *f, const char *when, const lt_coupon_view *v)
{
    if (!v->ok) {
        fprintf(f, "  %-7s %s: unreadable: %s\n", when, v->source, v->err);
        return;
    }
    fprintf(f, "  %-7s %-34s total %" PRId64 "  stock %" PRId64 "  issued %" PRId64
               "  per_user_limit %" PRId64,
            when, v->source, v->total, v->stock, v->issued, v->per_user_limit);
    if (v->has_users && v->per_user_limit > 0)
        fprintf(f, "  users over limit %" PRId64, v->users_over_limit);
    fputc('\n', f);
}

int lt_report_text(FILE *f, const lt_summary *s)
{
    const lt_options *o = s->opt;
    const lt_stats *st = s->stats;
    const lt_audit *a = s->audit;
    const lt_coupon_view *fin = final_view(a);
    char verdict[64];
    lt_code_count codes[LT_CODE_SLOTS];

    fprintf(f, "coupon-loadtest: coupon %" PRId64 ", %u connections on %u threads over %zu URL(s), route %s, %s, ",
            o->coupon_id, o->connections, o->threads, o->n_urls, lt_route_name(o->route), o->use_get ? "GET" : "POST");
    if (o->users > 0)
        fprintf(f, "users drawn from %" PRIu64 "\n", o->users);
    else
        fprintf(f, "a distinct user per request\n");
    if (o->rate > 0)
        fprintf(f, "load:       open loop at %.1f req/s, latency from each request's due time\n", o->rate);
    if (o->warmup_s > 0)
        fprintf(f, "warm-up:    first %.3f s: %" PRIu64 " answered (%" PRIu64 " won), %" PRIu64
                   " errors; in the audit only\n",
                o->warmup_s, s->warm->answered, s->warm->successes, s->warm->errors);
    fprintf(f, "requests:   %" PRIu64 " answered in %.3f s, throughput %.1f req/s%s\n", st->answered,
            s->elapsed_s, throughput(s), s->interrupted ? " (interrupted)" : "");
    fprintf(f, "latency ms:");
    for (size_t i = 0; i < N_PCTS; i++)
        fprintf(f, " %s %.3f ", pct_names[i], ms(cm_hist_quantile(&st->hist, pcts[i])));
    fprintf(f, " max %.3f  (mean %.3f, %" PRIu64 " answered)\n", ms(st->hist.max),
            cm_hist_mean(&st->hist) / 1000.0, st->hist.n);
    for (int k = 0; k < LT_OUT_COUNT; k++) {
        const cm_hist *h = &st->by_outcome[k];
        fprintf(f, "  %-9s %8" PRIu64, lt_outcome_name((lt_outcome)k), h->n);
        if (h->n > 0) {
            for (size_t i = 0; i < N_PCTS; i++)
                fprintf(f, "  %s %.3f", pct_names[i], ms(cm_hist_quantile(h, pcts[i])));
            fprintf(f, "  max %.3f", ms(h->max));
        }
        fputc('\n', f);
    }
    fprintf(f, "by status:");
    for (size_t i = 0; i < LT_STATUS_SLOTS; i++)
        if (st->by_status[i] > 0)
            fprintf(f, "  %zu: %" PRIu64, i, st->by_status[i]);
    if (st->status_other > 0)
        fprintf(f, "  other: %" PRIu64, st->status_other);
    fprintf(f, "\nby code:  ");
    sorted_codes(st, codes);
    for (size_t i = 0; i < st->n_codes; i++) {
        if (codes[i].code == LT_CODE_MISSING)
            fprintf(f, "  missing: %" PRIu64, codes[i].count);
        else
            fprintf(f, "  %ld: %" PRIu64, codes[i].code, codes[i].count);
    }
    if (st->code_other > 0)
        fprintf(f, "  other: %" PRIu64, st->code_other);
    fprintf(f, "\nerrors:     %" PRIu64 " sent without an answer", st->errors);
    for (size_t i = 0; i < LT_CURL_SLOTS; i++)
        if (st->errors_by_curl[i] > 0)
            fprintf(f, "  (%s: %" PRIu64 ")", curl_easy_strerror((CURLcode)i), st->errors_by_curl[i]);
    fprintf(f, "\nconnects:   %" PRIu64 " attempts, %" PRIu64 " failed", st->connect_attempts,
            st->connect_failures);
    for (size_t i = 0; i < LT_CURL_SLOTS; i++)
        if (st->connect_by_curl[i] > 0)
            fprintf(f, "  (%s: %" PRIu64 ")", curl_easy_strerror((CURLcode)i), st->connect_by_curl[i]);
    fprintf(f, "; %" PRIu64 " connections gave up, %" PRIu64 " requests unsent", st->gave_up, st->unsent);
    fprintf(f, "\naudit of coupon %" PRId64 ":\n", a->coupon_id);
    text_view(f, "before", &a->before);
    if (a->have_db)
        text_view(f, "before", &a->db_before);
    for (size_t i = 0; i < a->n_after; i++)
        text_view(f, "after", &a->after[i]);
    if (a->have_db)
        text_view(f, "after", &a->db_after);
    if (fin != NULL && a->before.ok)
        fprintf(f, "  successes seen %" PRIu64 ", issued %" PRId64 " -> %" PRId64 " (delta %" PRId64
                   "), stock left %" PRId64 "\n",
                a->successes_seen, a->before.issued, fin->issued, fin->issued - a->before.issued,
                fin->stock);
    if (fin != NULL)
        fprintf(f, "  issued: %" PRId64 " of %" PRId64 "\n", fin->issued, fin->total);
    for (size_t i = 0; i < a->n_findings; i++)
        fprintf(f, "  FINDING (excess %" PRId64 "): %s\n", a->findings[i].excess, a->findings[i].what);
    if (a->findings_dropped > 0)
        fprintf(f, "  ... and %zu more findings\n", a->findings_dropped);
    fprintf(f, "verdict: %s\n", lt_verdict(a, verdict, sizeof verdict));
    fflush(f);
    return ferror(f) ? -1 : 0;
}

/* json_object_set_new steals the value even on failure; a NULL value (a failed
 * json_*() constructor) is reported as a failure too. */
static int jset(json_t *obj, const char *key, json_t *val)
{
    return (val == NULL || json_object_set_new(obj, key, val) != 0) ? 1 : 0;
}

static json_t *json_view(const lt_coupon_view *v)
{
    int bad = 0;
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bad |= jset(o, "source", json_string(v->source));
    bad |= jset(o, "ok", json_boolean(v->ok));
    if (v->ok) {
        bad |= jset(o, "total", json_integer(v->total));
        bad |= jset(o, "stock", json_integer(v->stock));
        bad |= jset(o, "issued", json_integer(v->issued));
        bad |= jset(o, "per_user_limit", json_integer(v->per_user_limit));
        if (v->has_users) {
            bad |= jset(o, "users_over_limit", json_integer(v->users_over_limit));
            bad |= jset(o, "excess_records", json_integer(v->excess_records));
        }
    } else {
        bad |= jset(o, "error", json_string(v->err));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *json_audit(const lt_audit *a)
{
    int bad = 0;
    const lt_coupon_view *fin = final_view(a);
    json_t *o = json_object();
    json_t *servers = json_array();
    json_t *findings = json_array();
    if (o == NULL || servers == NULL || findings == NULL)
        goto fail;
    for (size_t i = 0; i < a->n_after; i++)
        if (json_array_append_new(servers, json_view(&a->after[i])) != 0)
            goto fail;
    for (size_t i = 0; i < a->n_findings; i++) {
        json_t *fo = json_object();
        if (fo == NULL || json_array_append_new(findings, fo) != 0)
            goto fail;
        bad |= jset(fo, "what", json_string(a->findings[i].what));
        bad |= jset(fo, "excess", json_integer(a->findings[i].excess));
    }
    bad |= jset(o, "coupon", json_integer(a->coupon_id));
    bad |= jset(o, "before", json_view(&a->before));
    bad |= jset(o, "servers", servers);
    servers = NULL;
    if (a->have_db) {
        bad |= jset(o, "db_before", json_view(&a->db_before));
        bad |= jset(o, "db", json_view(&a->db_after));
    } else {
        bad |= jset(o, "db", json_null());
    }
    bad |= jset(o, "successes_seen", json_integer((json_int_t)a->successes_seen));
    if (fin != NULL && a->before.ok) {
        bad |= jset(o, "issued_before", json_integer(a->before.issued));
        bad |= jset(o, "issued_after", json_integer(fin->issued));
        bad |= jset(o, "issued_delta", json_integer(fin->issued - a->before.issued));
    }
    bad |= jset(o, "findings", findings);
    findings = NULL;
    bad |= jset(o, "findings_dropped", json_integer((json_int_t)a->findings_dropped));
    bad |= jset(o, "complete", json_boolean(!a->incomplete));
    bad |= jset(o, "oversold_by", json_integer(a->oversold_by));
    if (bad)
        goto fail;
    return o;
fail:
    json_decref(findings);
    json_decref(servers);
    json_decref(o);
    return NULL;
}

/* p50 .. p99.9, max, min, mean and count of h into o; 1 when a field failed. */
static int json_latency(json_t *o, const cm_hist *h)
{
    int bad = 0;
    for (size_t i = 0; i < N_PCTS; i++)
        bad |= jset(o, pct_names[i], json_real(ms(cm_hist_quantile(h, pcts[i]))));
    bad |= jset(o, "max", json_real(ms(h->max)));
    bad |= jset(o, "min", json_real(h->n ? ms(h->min) : 0.0));
    bad |= jset(o, "mean", json_real(cm_hist_mean(h) / 1000.0));
    bad |= jset(o, "count", json_integer((json_int_t)h->n));
    return bad;
}

int lt_report_json(FILE *f, const lt_summary *s)
{
    int rc = -1, bad = 0;
    const lt_options *o = s->opt;
    const lt_stats *st = s->stats;
    char verdict[64], key[32];
    lt_code_count codes[LT_CODE_SLOTS];
    json_t *root = json_object();
    json_t *urls = json_array();
    json_t *lat = json_object();
    json_t *by_status = json_object();
    json_t *by_code = json_object();
    json_t *errors = json_object();
    json_t *by_kind = json_object();
    json_t *lat_by = json_object();
    json_t *conn = json_object();
    json_t *conn_kind = json_object();
    json_t *warm = json_object();

    if (root == NULL || urls == NULL || lat == NULL || by_status == NULL || by_code == NULL ||
        errors == NULL || by_kind == NULL || lat_by == NULL || conn == NULL || conn_kind == NULL ||
        warm == NULL)
        goto out;
    for (size_t i = 0; i < o->n_urls; i++)
        bad |= json_array_append_new(urls, json_string(o->urls[i])) != 0;
    bad |= json_latency(lat, &st->hist);
    for (int k = 0; k < LT_OUT_COUNT; k++) {
        json_t *one = json_object();
        /* Filled before it is handed over: jset frees it on failure. */
        bad |= one != NULL && json_latency(one, &st->by_outcome[k]);
        bad |= jset(lat_by, lt_outcome_name((lt_outcome)k), one);
    }
    for (size_t i = 0; i < LT_STATUS_SLOTS; i++) {
        if (st->by_status[i] == 0)
            continue;
        snprintf(key, sizeof key, "%zu", i);
        bad |= jset(by_status, key, json_integer((json_int_t)st->by_status[i]));
    }
    if (st->status_other > 0)
        bad |= jset(by_status, "other", json_integer((json_int_t)st->status_other));
    sorted_codes(st, codes);
    for (size_t i = 0; i < st->n_codes; i++) {
        if (codes[i].code == LT_CODE_MISSING)
            snprintf(key, sizeof key, "missing");
        else
            snprintf(key, sizeof key, "%ld", codes[i].code);
        bad |= jset(by_code, key, json_integer((json_int_t)codes[i].count));
    }
    if (st->code_other > 0)
        bad |= jset(by_code, "other", json_integer((json_int_t)st->code_other));
    for (size_t i = 0; i < LT_CURL_SLOTS; i++)
        if (st->errors_by_curl[i] > 0)
            bad |= jset(by_kind, curl_easy_strerror((CURLcode)i),
                        json_integer((json_int_t)st->errors_by_curl[i]));
    bad |= jset(errors, "total", json_integer((json_int_t)st->errors));
    bad |= jset(errors, "by_kind", by_kind);
    by_kind = NULL;
    for (size_t i = 0; i < LT_CURL_SLOTS; i++)
        if (st->connect_by_curl[i] > 0)
            bad |= jset(conn_kind, curl_easy_strerror((CURLcode)i),
                        json_integer((json_int_t)st->connect_by_curl[i]));
    bad |= jset(conn, "attempts", json_integer((json_int_t)st->connect_attempts));
    bad |= jset(conn, "failures", json_integer((json_int_t)st->connect_failures));
    bad |= jset(conn, "by_kind", conn_kind);
    conn_kind = NULL;
    bad |= jset(conn, "gave_up", json_integer((json_int_t)st->gave_up));
    bad |= jset(conn, "unsent", json_integer((json_int_t)st->unsent));
    bad |= jset(warm, "seconds", json_real(o->warmup_s));
    bad |= jset(warm, "answered", json_integer((json_int_t)s->warm->answered));
    bad |= jset(warm, "successes", json_integer((json_int_t)s->warm->successes));
    bad |= jset(warm, "errors", json_integer((json_int_t)s->warm->errors));

    bad |= jset(root, "coupon", json_integer(o->coupon_id));
    bad |= jset(root, "urls", urls);
    urls = NULL;
    bad |= jset(root, "threads", json_integer(o->threads));
    bad |= jset(root, "connections", json_integer(o->connections));
    bad |= jset(root, "route", json_string(lt_route_name(o->route)));
    bad |= jset(root, "method", json_string(o->use_get ? "GET" : "POST"));
    bad |= jset(root, "users", json_integer((json_int_t)o->users));
    bad |= jset(root, "requests", json_integer((json_int_t)s->requests_done));
    bad |= jset(root, "answered", json_integer((json_int_t)st->answered));
    bad |= jset(root, "elapsed_s", json_real(s->elapsed_s));
    bad |= jset(root, "throughput", json_real(throughput(s)));
    bad |= jset(root, "interrupted", json_boolean(s->interrupted));
    bad |= jset(root, "rate", o->rate > 0 ? json_real(o->rate) : json_null());
    bad |= jset(root, "warmup", warm);
    warm = NULL;
    bad |= jset(root, "latency_ms", lat);
    lat = NULL;
    bad |= jset(root, "latency_ms_by_outcome", lat_by);
    lat_by = NULL;
    bad |= jset(root, "by_status", by_status);
    by_status = NULL;
    bad |= jset(root, "by_code", by_code);
    by_code = NULL;
    bad |= jset(root, "successes", json_integer((json_int_t)st->successes));
    bad |= jset(root, "errors", errors);
    errors = NULL;
    bad |= jset(root, "connects", conn);
    conn = NULL;
    bad |= jset(root, "audit", json_audit(s->audit));
    bad |= jset(root, "verdict", json_string(lt_verdict(s->audit, verdict, sizeof verdict)));
    bad |= jset(root, "oversold_by", json_integer(s->audit->oversold_by));
    bad |= jset(root, "stuck", json_boolean(s->audit->stuck));
    if (bad)
        goto out;
    if (json_dumpf(root, f, JSON_INDENT(2)) != 0 || fputc('\n', f) == EOF || fflush(f) != 0)
        goto out;
    rc = 0;
out:
    json_decref(warm);
    json_decref(conn_kind);
    json_decref(conn);
    json_decref(lat_by);
    json_decref(by_kind);
    json_decref(errors);
    json_decref(by_code);
    json_decref(by_status);
    json_decref(lat);
    json_decref(urls);
    json_decref(root);
    return rc;
}
