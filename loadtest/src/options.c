/* options.c - coupon-loadtest's command line: parsing, validation, --help. */
#include "loadtest.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void lt_usage(FILE *f)
{
    fputs(
        "usage: coupon-loadtest --url URL[,URL...] --coupon ID --threads T\n"
        "                       (--requests R | --duration S) [options]\n"
        "\n"
        "Hammers POST /api/v1/coupon/add?coupon_id=ID&user_id=U on one or more\n"
        "coupon-server instances, then audits the coupon for overselling.\n"
        "\n"
        "  --url URL[,URL...]   server base URLs (http://HOST:PORT); connections are\n"
        "                       spread over them round-robin\n"
        "  --coupon ID          coupon to claim (positive integer)\n"
        "  --threads T          worker threads (default 8)\n"
        "  --connections C      keep-alive connections in all (default T), shared out\n"
        "                       over the threads, each driving its share on its own\n"
        "                       epoll set; few threads and many connections cost the\n"
        "                       server's cores least (e.g. --threads 2 --connections 64)\n"
        "  --requests R         total requests over all threads (exact)\n"
        "  --duration S         stop after S seconds (with --requests: whichever first)\n"
        "  --users U            draw user ids u0..u(U-1) at random per request, so\n"
        "                       per-user limits are exercised (default: a distinct\n"
        "                       user per request, prefixed by a random run tag)\n"
        "  --user-prefix P      prefix of user ids instead of 'u' / the run tag\n"
        "  --seed N             PRNG seed for --users (default: random)\n"
        "  --db PATH            also audit the SQLite file (opened read-only)\n"
        "  --method POST|GET    claim method (default POST, the canonical one)\n"
        "  --timeout-ms MS      whole-request timeout (default 10000)\n"
        "  --connect-timeout-ms MS  connect timeout (default 3000)\n"
        "  --json               print the report as one JSON object on stdout\n"
        "  --quiet              no progress line on stderr\n"
        "  -h, --help           this text\n"
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
        "Exit status: 0 NO OVERSELL, 1 OVERSOLD, 2 usage error, unreachable server,\n"
        "unreadable DB, or an audit that could not read every source.\n",
        f);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whole-string unsigned decimal in [lo, hi]; strtoull alone accepts "-1" and "12x". */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

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
        fail(err, errlen, "out of memory");
        goto out;
    }
    for (const char *c = csv; *c != '\0'; c++)
        if (*c == ',')
            cap++;
    cap++;
    o->urls = calloc(cap, sizeof *o->urls);
    if (o->urls == NULL) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(tok);
        if (strncasecmp(tok, "http://", 7) != 0 && strncasecmp(tok, "https://", 8) != 0) {
            fail(err, errlen, "--url: '%s' is not an http:// or https:// URL", tok);
            goto out;
        }
        /* The request path is appended: "http://h:p/" + "/api" would double the slash. */
        while (n > 0 && tok[n - 1] == '/')
            tok[--n] = '\0';
        if (n <= 8 || strchr(tok, '?') != NULL || strchr(tok, ' ') != NULL) {
            fail(err, errlen, "--url: '%s' is not a base URL like http://127.0.0.1:8080", tok);
            goto out;
        }
        o->urls[o->n_urls] = strdup(tok);
        if (o->urls[o->n_urls] == NULL) {
            fail(err, errlen, "out of memory");
            goto out;
        }
        o->n_urls++;
    }
    if (o->n_urls == 0) {
        fail(err, errlen, "--url: no URL given");
        goto out;
    }
    rc = 0;
out:
    free(copy);
    return rc;
}

int lt_options_parse(int argc, char **argv, lt_options *o, char *err, size_t errlen)
{
    const char *url = NULL;
    int have_coupon = 0, have_requests = 0, have_duration = 0;
    memset(o, 0, sizeof *o);
    o->threads = 8;
    o->timeout_ms = 10000;
    o->connect_timeout_ms = 3000;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = NULL;
        char name[40];
        const char *eq;
        uint64_t u = 0;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            o->help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0)
            return fail(err, errlen, "unexpected argument '%s' (options start with --)", arg);
        /* Both "--name value" and "--name=value". */
        eq = strchr(arg, '=');
        if (eq != NULL) {
            size_t n = (size_t)(eq - arg);
            if (n >= sizeof name)
                return fail(err, errlen, "unknown option '%.*s'", (int)n, arg);
            memcpy(name, arg, n);
            name[n] = '\0';
            val = eq + 1;
        } else {
            if (strlen(arg) >= sizeof name)
                return fail(err, errlen, "unknown option '%s'", arg);
            strcpy(name, arg);
        }

        if (strcmp(name, "--json") == 0 || strcmp(name, "--quiet") == 0) {
            if (val != NULL)
                return fail(err, errlen, "%s takes no value", name);
            if (strcmp(name, "--json") == 0)
                o->json = 1;
            else
                o->quiet = 1;
            continue;
        }

        static const char *const with_value[] = {
            "--url", "--coupon", "--threads", "--connections", "--requests", "--duration", "--users",
            "--user-prefix", "--seed", "--db", "--method", "--timeout-ms", "--connect-timeout-ms"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            if (strcmp(name, with_value[k]) == 0)
                known = 1;
        if (!known)
            return fail(err, errlen, "unknown option '%s' (see --help)", name);
        if (val == NULL) {
            if (i + 1 >= argc)
                return fail(err, errlen, "%s needs a value", name);
            val = argv[++i];
        }

        if (strcmp(name, "--url") == 0) {
            url = val;
        } else if (strcmp(name, "--coupon") == 0) {
            if (parse_u64(val, 1, INT64_MAX, &u) != 0)
                return fail(err, errlen, "--coupon: '%s' is not a positive integer", val);
            o->coupon_id = (int64_t)u;
            have_coupon = 1;
        } else if (strcmp(name, "--threads") == 0) {
            if (parse_u64(val, 1, LT_THREADS_MAX, &u) != 0)
                return fail(err, errlen, "--threads: '%s' is not an integer in 1..%u", val,
                            LT_THREADS_MAX);
            o->threads = (unsigned)u;
        } else if (strcmp(name, "--connections") == 0) {
            if (parse_u64(val, 1, LT_CONNECTIONS_MAX, &u) != 0)
                return fail(err, errlen, "--connections: '%s' is not an integer in 1..%u", val,
                            LT_CONNECTIONS_MAX);
            o->connections = (unsigned)u;
        } else if (strcmp(name, "--requests") == 0) {
            if (parse_u64(val, 1, UINT64_MAX / 2, &u) != 0)
                return fail(err, errlen, "--requests: '%s' is not a positive integer", val);
            o->requests = u;
            have_requests = 1;
        } else if (strcmp(name, "--duration") == 0) {
            char *end = NULL;
            double d;
            errno = 0;
            d = strtod(val, &end);
            if (errno != 0 || end == val || *end != '\0' || !isfinite(d) || d <= 0 || d > 86400 * 7)
                return fail(err, errlen, "--duration: '%s' is not a number of seconds > 0", val);
            o->duration_s = d;
            have_duration = 1;
        } else if (strcmp(name, "--users") == 0) {
            if (parse_u64(val, 1, UINT64_MAX / 2, &u) != 0)
                return fail(err, errlen, "--users: '%s' is not a positive integer", val);
            o->users = u;
        } else if (strcmp(name, "--user-prefix") == 0) {
            if (!valid_user_prefix(val))
                return fail(err, errlen,
                            "--user-prefix: '%s' must be 1-%d characters of [A-Za-z0-9_.:-]", val,
                            LT_USER_MAX - 20);
            o->user_prefix = val;
        } else if (strcmp(name, "--seed") == 0) {
            if (parse_u64(val, 0, UINT64_MAX, &u) != 0)
                return fail(err, errlen, "--seed: '%s' is not a non-negative integer", val);
            o->seed = u;
        } else if (strcmp(name, "--db") == 0) {
            if (*val == '\0')
                return fail(err, errlen, "--db: empty path");
            o->db_path = val;
        } else if (strcmp(name, "--method") == 0) {
            if (strcasecmp(val, "POST") == 0)
                o->use_get = 0;
            else if (strcasecmp(val, "GET") == 0)
                o->use_get = 1;
            else
                return fail(err, errlen, "--method: '%s' is not POST or GET", val);
        } else if (strcmp(name, "--timeout-ms") == 0) {
            if (parse_u64(val, 1, 3600000, &u) != 0)
                return fail(err, errlen, "--timeout-ms: '%s' is not an integer in 1..3600000", val);
            o->timeout_ms = (long)u;
        } else if (strcmp(name, "--connect-timeout-ms") == 0) {
            if (parse_u64(val, 1, 600000, &u) != 0)
                return fail(err, errlen, "--connect-timeout-ms: '%s' is not an integer in 1..600000",
                            val);
            o->connect_timeout_ms = (long)u;
        }
    }

    if (url == NULL)
        return fail(err, errlen, "missing --url (see --help)");
    if (!have_coupon)
        return fail(err, errlen, "missing --coupon (see --help)");
    if (!have_requests && !have_duration)
        return fail(err, errlen, "give --requests R or --duration S (see --help)");
    if (o->connections == 0)
        o->connections = o->threads;
    /* A thread with no connection would idle; fewer threads would do the same work. */
    if (o->connections < o->threads)
        return fail(err, errlen, "--connections %u is less than --threads %u", o->connections,
                    o->threads);
    return parse_urls(url, o, err, errlen);
}

void lt_options_free(lt_options *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n_urls; i++)
        free(o->urls[i]);
    free(o->urls);
    o->urls = NULL;
    o->n_urls = 0;
}
