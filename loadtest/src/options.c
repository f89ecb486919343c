/* options.c - coupon-loadtest's command line: the option table (common/'s
 * parser), the checks across options, the URL list and --help. */
#include "loadtest.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The command line as given: options whose field type is not the parser's
 * (int64_t, unsigned, long) land here first and are checked into
 * lt_options; the rest go straight into o. */
typedef struct lt_cmdline {
    lt_options o;
    const char *url;
    uint64_t coupon;
    uint64_t threads;
    uint64_t connections; /* 0 = as many as threads */
    uint64_t timeout_ms;
    uint64_t connect_timeout_ms;
    uint64_t give_up_ms;
    const char *coupons;  /* --coupons as given */
    uint64_t bundle;
} lt_cmdline;

static int valid_user_prefix(const char *p)
{
    size_t n = strlen(p);
    /* 64-char user ids: leave room for 20 decimal digits after the prefix. */
    if (n == 0 || n > LT_USER_MAX - 20)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == ':' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static int parse_urls(const char *csv, lt_options *o, char *err, size_t errlen)
{
    int rc = -1;
    char *copy = strdup(csv);
    char *save = NULL;
    size_t cap = 0;
    if (copy == NULL) {
        cm_fail(err, errlen, "out of memory");
        goto out;
    }
    for (const char *c = csv; *c != '\0'; c++)
        if (*c == ',')
            cap++;
    cap++;
    o->urls = calloc(cap, sizeof *o->urls);
    if (o->urls == NULL) {
        cm_fail(err, errlen, "out of memory");
        goto out;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(tok);
        if (strncasecmp(tok, "http://", 7) != 0 && strncasecmp(tok, "https://", 8) != 0) {
            cm_fail(err, errlen, "--url: '%s' is not an http:// or https:// URL", tok);
            goto out;
        }
        /* The request path is appended: "http://h:p/" + "/api" would double the slash. */
        while (n > 0 && tok[n - 1] == '/')
            tok[--n] = '\0';
        if (n <= 8 || strchr(tok, '?') != NULL || strchr(tok, ' ') != NULL) {
            cm_fail(err, errlen, "--url: '%s' is not a base URL like http://127.0.0.1:8080", tok);
            goto out;
        }
        o->urls[o->n_urls] = strdup(tok);
        if (o->urls[o->n_urls] == NULL) {
            cm_fail(err, errlen, "out of memory");
            goto out;
        }
        o->n_urls++;
    }
    if (o->n_urls == 0) {
        cm_fail(err, errlen, "--url: no URL given");
        goto out;
    }
    rc = 0;
out:
    free(copy);
    return rc;
}

static int convert_user_prefix(const char *val, void *field, char *err, size_t errlen)
{
    if (!valid_user_prefix(val))
        return cm_fail(err, errlen, "'%s' must be 1-%d characters of [A-Za-z0-9_.:-]", val,
                    LT_USER_MAX - 20);
    *(const char **)field = val;
    return 0;
}

static int convert_path(const char *val, void *field, char *err, size_t errlen)
{
    if (*val == '\0')
        return cm_fail(err, errlen, "empty path");
    *(const char **)field = val;
    return 0;
}

static int convert_route(const char *val, void *field, char *err, size_t errlen)
{
    if (lt_route_parse(val, field) != 0)
        return cm_fail(err, errlen, "'%s' is not rr or coupon", val);
    return 0;
}

static int convert_method(const char *val, void *field, char *err, size_t errlen)
{
    int *use_get = field;
    if (strcasecmp(val, "POST") == 0)
        *use_get = 0;
    else if (strcasecmp(val, "GET") == 0)
        *use_get = 1;
    else
        return cm_fail(err, errlen, "'%s' is not POST or GET", val);
    return 0;
}

#define AT(field) offsetof(lt_cmdline, field)

static const cm_option options[] = {
    {.name = "url", .kind = CM_ARG_STRING, .offset = AT(url), .required = 1,
     .metavar = "URL[,URL...]",
     .help = "server base URLs (http://HOST:PORT); connections are\n"
             "spread over them round-robin (see --route)"},
    {.name = "route", .kind = CM_ARG_STRING, .offset = AT(o.route), .convert = convert_route,
     .metavar = "rr|coupon",
     .help = "which URL a claim goes to (default rr): rr, its\n"
             "connection's, connections dealt round robin over the\n"
             "URLs; coupon, the URL a consistent hash of its coupon\n"
             "id picks (jump hash), as HAProxy's balance url_param\n"
             "coupon_id with hash-type consistent: every claim of a\n"
             "coupon reaches one server (not with --bundle)"},
    {.name = "coupon", .kind = CM_ARG_U64, .offset = AT(coupon), .ulo = 1, .uhi = INT64_MAX,
     .expect = "a positive integer", .metavar = "ID",
     .help = "coupon to claim (positive integer); with --coupons N,\n"
             "the first of the N"},
    {.name = "coupons", .kind = CM_ARG_STRING, .offset = AT(coupons), .convert = convert_path,
     .metavar = "N|A-B|A,B,...",
     .help = "spread the claims over several coupons: N coupons\n"
             "from --coupon (default 1), the ids A to B, or a list;\n"
             "each claim draws one (uniform, or --zipf), and the\n"
             "audit judges every coupon; each connection is then a\n"
             "thread sending one request at a time"},
    {.name = "zipf", .kind = CM_ARG_DOUBLE, .offset = AT(o.zipf), .dlo = 0, .dlo_open = 1, .dhi = 10,
     .expect = "a number > 0", .metavar = "S",
     .help = "with --coupons: draw the k-th coupon with weight 1/k^S\n"
             "(skewed: the first few coupons are hot)"},
    {.name = "bundle", .kind = CM_ARG_U64, .offset = AT(bundle), .ulo = 2, .uhi = LT_BUNDLE_MAX,
     .metavar = "K",
     .help = "with --coupons: each request claims a bundle of K\n"
             "distinct coupons drawn from the set, in random order\n"
             "(POST /api/v1/coupon/bundle); the audit also checks\n"
             "that every bundle is whole or absent (needs --db)"},
    {.name = "threads", .kind = CM_ARG_U64, .offset = AT(threads), .ulo = 1, .uhi = LT_THREADS_MAX,
     .metavar = "T", .help = "worker threads (default 8)"},
    {.name = "connections", .kind = CM_ARG_U64, .offset = AT(connections), .ulo = 1,
     .uhi = LT_CONNECTIONS_MAX, .metavar = "C",
     .help = "keep-alive connections in all (default T), shared out\n"
             "over the threads, each driving its share on its own\n"
             "epoll set; few threads and many connections cost the\n"
             "server's cores least (e.g. --threads 2 --connections 64)"},
    {.name = "requests", .kind = CM_ARG_U64, .offset = AT(o.requests), .ulo = 1,
     .uhi = UINT64_MAX / 2, .expect = "a positive integer", .metavar = "R",
     .help = "total requests over all threads (exact)"},
    {.name = "rate", .kind = CM_ARG_DOUBLE, .offset = AT(o.rate), .dlo = 0, .dlo_open = 1, .dhi = 1e7,
     .expect = "a number of requests per second > 0", .metavar = "R",
     .help = "open loop: send R requests/s in all, request k due at\n"
             "start + k/R whether or not earlier ones were answered;\n"
             "latency runs from the due time, so a stalled server\n"
             "shows its stall (no coordinated omission). Default:\n"
             "closed loop, each connection sends when answered"},
    {.name = "warmup", .kind = CM_ARG_DOUBLE, .offset = AT(o.warmup_s), .dlo = 0, .dlo_open = 1,
     .dhi = 86400, .expect = "a number of seconds > 0", .metavar = "S",
     .help = "requests started in the first S seconds count in the\n"
             "audit but not in latency, throughput or the answers\n"
             "by status and code (reported apart)"},
    {.name = "timeline", .kind = CM_ARG_STRING, .offset = AT(o.timeline_path), .convert = convert_path,
     .metavar = "FILE.csv",
     .help = "write one CSV line per 250 ms of the run (by answer\n"
             "time): t_ms, answered, won, 503_1005, 503_1006,\n"
             "503_1010, errors, p50_ms, p99_ms (empty when nothing\n"
             "was answered); warm-up included"},
    {.name = "duration", .kind = CM_ARG_DOUBLE, .offset = AT(o.duration_s), .dlo = 0, .dlo_open = 1,
     .dhi = 86400 * 7, .expect = "a number of seconds > 0", .metavar = "S",
     .help = "stop after S seconds (with --requests: whichever first)"},
    {.name = "users", .kind = CM_ARG_U64, .offset = AT(o.users), .ulo = 1, .uhi = UINT64_MAX / 2,
     .expect = "a positive integer", .metavar = "U",
     .help = "draw user ids u0..u(U-1) at random per request, so\n"
             "per-user limits are exercised (default: a distinct\n"
             "user per request, prefixed by a random run tag)"},
    {.name = "user-prefix", .kind = CM_ARG_STRING, .offset = AT(o.user_prefix),
     .convert = convert_user_prefix, .metavar = "P",
     .help = "prefix of user ids instead of 'u' / the run tag"},
    {.name = "seed", .kind = CM_ARG_U64, .offset = AT(o.seed), .ulo = 0, .uhi = UINT64_MAX,
     .expect = "a non-negative integer", .metavar = "N",
     .help = "PRNG seed for --users (default: random)"},
    {.name = "db", .kind = CM_ARG_STRING, .offset = AT(o.db_path), .convert = convert_path,
     .metavar = "PATH|URL",
     .help = "also audit the SQLite file, or the postgresql:// database\n"
             "(read-only, one snapshot)"},
    {.name = "method", .kind = CM_ARG_STRING, .offset = AT(o.use_get), .convert = convert_method,
     .metavar = "POST|GET", .help = "claim method (default POST, the canonical one)"},
    {.name = "timeout-ms", .kind = CM_ARG_U64, .offset = AT(timeout_ms), .ulo = 1, .uhi = 3600000,
     .metavar = "MS", .help = "whole-request timeout (default 10000)"},
    {.name = "connect-timeout-ms", .kind = CM_ARG_U64, .offset = AT(connect_timeout_ms), .ulo = 1,
     .uhi = 600000, .metavar = "MS", .help = "connect timeout (default 3000)"},
    {.name = "give-up-ms", .kind = CM_ARG_U64, .offset = AT(give_up_ms), .ulo = 1, .uhi = 3600000,
     .metavar = "MS",
     .help = "a connection reconnects after a failed connect with\n"
             "an exponential back-off (10 ms doubling to 1 s,\n"
             "jittered) and gives up after MS of failures in a row;\n"
             "its held request is then reported unsent (default 5000)"},
    {.name = "audit-only", .kind = CM_ARG_NONE, .offset = AT(o.audit_only),
     .help = "send no claim: read the coupon from every URL (and\n"
             "--db) and judge it as it is now"},
    {.name = "json", .kind = CM_ARG_NONE, .offset = AT(o.json),
     .help = "print the report as one JSON object on stdout"},
    {.name = "quiet", .kind = CM_ARG_NONE, .offset = AT(o.quiet),
     .help = "no progress line on stderr"},
    {.name = "help", .short_name = 'h', .kind = CM_ARG_HELP, .offset = AT(o.help),
     .help = "this text"},
    {.name = "version", .kind = CM_ARG_HELP, .offset = AT(o.version), .help = "print the version and exit"},
};

static const cm_args_spec spec = {
    .opts = options,
    .n_opts = sizeof options / sizeof options[0],
    .usage = "usage: coupon-loadtest --url URL[,URL...] --coupon ID --threads T [--connections C]\n"
             "                       (--requests R | --duration S | --audit-only) [--rate R]\n"
             "                       [--warmup S] [--timeline FILE.csv] [--route rr|coupon]\n"
             "                       [options]\n"
             "\n"
             "Hammers POST /api/v1/coupon/add?coupon_id=ID&user_id=U on one or more\n"
             "coupon-server instances, then audits the coupon for overselling.\n"
             "\n",
    .epilogue =
        "\n"
        "Report: throughput is answers per second (after --warmup). Connects are\n"
        "counted apart ('connects:', JSON \"connects\"): attempts, failures by\n"
        "kind, connections that gave up, requests they held unsent; a refused\n"
        "connect is neither an answer nor a request. Latency: p50 p90 p99 p99.9\n"
        "max, overall and by outcome: won (code 0), sold_out (1003), 503 (1005,\n"
        "1006, 1010), other.\n"
        "\n"
        "Audit: the coupon is read (GET /api/v1/coupon/ID) from the first URL before\n"
        "the run, and from EVERY URL and the DB after it. N in 'OVERSOLD by N' is the\n"
        "largest excess any of these checks finds (0 = NO OVERSELL):\n"
        "  issued - total             records beyond the stock created (per source)\n"
        "  -stock                     stock below zero\n"
        "  |stock + issued - total|   stock and records disagree\n"
        "  excess records             records held beyond per_user_limit, summed\n"
        "                             over users (DB; when the limit is not 0)\n"
        "  |successes - delta|        code-0 answers seen vs issued_after -\n"
        "                             issued_before: a success lost or invented\n"
        "  |server - db|              a server's total/stock/issued vs the DB\n"
        "                             (vs the first server without --db)\n"
        "The cross-checks assume nobody else claims this coupon during the run;\n"
        "transport errors (no answer) can hide a success and fail the cross-check.\n"
        "\n"
        "STUCK: nothing oversold, but stock is left and every claim of the run was\n"
        "refused with 1005 (the lock could not be had): a sale standing still, e.g.\n"
        "behind a dead holder's lock that never expires.\n"
        "\n"
        "Exit status: 0 NO OVERSELL, 1 OVERSOLD, 2 usage error, unreachable server,\n"
        "unreadable DB, or an audit that could not read every source, 3 STUCK.\n",
    .help_column = 23,
};

/* --coupons: "N" (N ids from first), "A-B" or "A,B,...", into o's
 * ascending, duplicate-free set. 0, or -1 with err. */
static int parse_coupons(const char *spec, int64_t first, lt_options *o, char *err, size_t errlen)
{
    char *end = NULL;
    uint64_t a, b;
    const char *dash = strchr(spec, '-');

    if (strchr(spec, ',') != NULL) {
        size_t cap = 1;
        for (const char *c = spec; *c; c++)
            cap += *c == ',';
        if (cap > LT_COUPONS_MAX)
            return cm_fail(err, errlen, "--coupons: more than %u ids", LT_COUPONS_MAX);
        o->coupon_ids = calloc(cap, sizeof *o->coupon_ids);
        if (o->coupon_ids == NULL)
            return cm_fail(err, errlen, "out of memory");
        for (const char *p = spec; *p != '\0';) {
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (errno != 0 || end == p || v <= 0 || (*end != ',' && *end != '\0'))
                return cm_fail(err, errlen, "--coupons: '%s' is not a list of positive ids", spec);
            for (size_t i = 0; i < o->n_coupons; i++)
                if (o->coupon_ids[i] == v)
                    return cm_fail(err, errlen, "--coupons: id %lld listed twice", v);
            o->coupon_ids[o->n_coupons++] = v;
            p = *end == ',' ? end + 1 : end;
        }
        /* Ascending: the k-th for --zipf is the k-th smallest id. */
        for (size_t i = 1; i < o->n_coupons; i++)
            for (size_t j = i; j > 0 && o->coupon_ids[j - 1] > o->coupon_ids[j]; j--) {
                int64_t t = o->coupon_ids[j];
                o->coupon_ids[j] = o->coupon_ids[j - 1];
                o->coupon_ids[j - 1] = t;
            }
        return 0;
    }
    errno = 0;
    a = strtoull(spec, &end, 10);
    if (errno != 0 || end == spec || (dash != NULL ? end != dash : *end != '\0') || spec[0] == '-')
        return cm_fail(err, errlen, "--coupons: '%s' is not N, A-B or A,B,...", spec);
    if (dash != NULL) {
        const char *q = dash + 1;
        errno = 0;
        b = strtoull(q, &end, 10);
        if (errno != 0 || end == q || *end != '\0' || *q == '-' || a == 0 || b < a || b > INT64_MAX)
            return cm_fail(err, errlen, "--coupons: '%s' is not a range A-B of positive ids", spec);
    } else {
        if (a == 0 || (uint64_t)first > INT64_MAX - a)
            return cm_fail(err, errlen, "--coupons: '%s' is not a positive count", spec);
        b = (uint64_t)first + a - 1;
        a = (uint64_t)first;
    }
    if (b - a + 1 > LT_COUPONS_MAX)
        return cm_fail(err, errlen, "--coupons: more than %u ids", LT_COUPONS_MAX);
    o->n_coupons = (size_t)(b - a + 1);
    o->coupon_ids = calloc(o->n_coupons, sizeof *o->coupon_ids);
    if (o->coupon_ids == NULL)
        return cm_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < o->n_coupons; i++)
        o->coupon_ids[i] = (int64_t)(a + i);
    return 0;
}

int lt_usage(FILE *f)
{
    return cm_args_usage(f, &spec);
}

int lt_options_parse(int argc, char **argv, lt_options *o, char *err, size_t errlen)
{
    lt_cmdline cl;
    memset(o, 0, sizeof *o);
    memset(&cl, 0, sizeof cl);
    cl.threads = 8;
    cl.timeout_ms = 10000;
    cl.connect_timeout_ms = 3000;
    cl.give_up_ms = 5000;

    int rc = cm_args_parse(&spec, argc, argv, &cl, err, errlen);
    if (rc < 0)
        return -1;
    if (rc > 0) {
        *o = cl.o; /* o->help is set: main prints the usage */
        return 0;
    }
    if (cl.coupon == 0 && cl.coupons == NULL)
        return cm_fail(err, errlen, "missing --coupon ID (or --coupons, see --help)");
    if (cl.coupons == NULL && (cl.o.zipf > 0 || cl.bundle > 0))
        return cm_fail(err, errlen, "--zipf and --bundle need --coupons");
    if (cl.coupons != NULL && (cl.o.rate > 0 || cl.o.timeline_path != NULL || cl.o.audit_only || cl.o.warmup_s > 0))
        return cm_fail(err, errlen, "--coupons runs closed loop: no --rate, --timeline, --warmup or --audit-only");
    /* A bundle names several coupons, so there is no one coupon to route it by. */
    if (cl.o.route == LT_ROUTE_COUPON && cl.bundle > 0)
        return cm_fail(err, errlen, "--route coupon routes one-coupon claims: not with --bundle");
    if (cl.o.requests == 0 && cl.o.duration_s == 0 && !cl.o.audit_only)
        return cm_fail(err, errlen, "give --requests R or --duration S (see --help)");
    if (cl.o.warmup_s > 0 && cl.o.duration_s > 0 && cl.o.warmup_s >= cl.o.duration_s)
        return cm_fail(err, errlen, "--warmup %g is not shorter than --duration %g", cl.o.warmup_s,
                       cl.o.duration_s);
    if (cl.connections == 0)
        cl.connections = cl.threads;
    /* A thread with no connection would idle; fewer threads would do the same work. */
    if (cl.connections < cl.threads)
        return cm_fail(err, errlen, "--connections %u is less than --threads %u",
                       (unsigned)cl.connections, (unsigned)cl.threads);
    *o = cl.o;
    o->coupon_id = (int64_t)cl.coupon;
    o->threads = (unsigned)cl.threads;
    o->connections = (unsigned)cl.connections;
    o->timeout_ms = (long)cl.timeout_ms;
    o->connect_timeout_ms = (long)cl.connect_timeout_ms;
    o->give_up_ms = (long)cl.give_up_ms;
    o->bundle = (unsigned)cl.bundle;
    if (cl.coupons != NULL) {
        if (parse_coupons(cl.coupons, cl.coupon ? (int64_t)cl.coupon : 1, o, err, errlen) != 0)
            return -1;
        o->coupon_id = o->coupon_ids[0];
        if (o->bundle > o->n_coupons)
            return cm_fail(err, errlen, "--bundle %u is more than the %zu coupons of --coupons", o->bundle,
                           o->n_coupons);
    }
    return parse_urls(cl.url, o, err, errlen);
}

void lt_options_free(lt_options *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n_urls; i++)
        free(o->urls[i]);
    free(o->urls);
    o->urls = NULL;
    free(o->coupon_ids);
    o->coupon_ids = NULL;
    o->n_coupons = 0;
    o->n_urls = 0;
}
