/* config.c - coupon-server options: defaults, COUPON_* environment variables,
 * long options, and strict validation (every number fully consumed, in range). */
#include "core/config.h"

#include "claim/strategy.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum opt_id {
    OPT_LISTEN = 1,
    OPT_DB,
    OPT_REDIS,
    OPT_LOCK_TTL,
    OPT_LOCK_WAIT,
    OPT_LOCK_RETRY,
    OPT_LOCK_BATCH,
    OPT_REDIS_TIMEOUT,
    OPT_REDIS_CONNECT,
    OPT_STRATEGY,
    OPT_THREADS,
    OPT_ADMIN_TOKEN,
    OPT_WORK_US,
    OPT_UNSAFE_DELAY,
    OPT_FENCE,
    OPT_FAULT_PAUSE,
    OPT_DB_BUSY,
    OPT_MAX_BODY,
    OPT_MAX_HEADER,
    OPT_MAX_CONNS,
    OPT_CONN_TIMEOUT,
    OPT_GRACE,
    OPT_HELP
};

typedef struct opt_desc {
    enum opt_id id;
    const char *name;  /* long option, without "--" */
    const char *env;   /* environment variable, or NULL */
    const char *arg;   /* argument name for --help */
    int64_t lo, hi;    /* range for numeric options (lo > hi: not numeric) */
    const char *help;
} opt_desc;

static const opt_desc OPTS[] = {
    {OPT_LISTEN, "listen", "COUPON_LISTEN", "HOST:PORT", 1, 0,
     "address to serve on (default 127.0.0.1:8080; port 0 picks a free port)"},
    {OPT_DB, "db", "COUPON_DB", "PATH", 1, 0,
     "SQLite file, created with its schema if absent (default coupon.db)"},
    {OPT_REDIS, "redis", "COUPON_REDIS", "ADDR[,ADDR...]", 1, 0,
     "Redis masters, host:port or unix:/path; one = single instance, several = Redlock (default 127.0.0.1:6379)"},
    {OPT_LOCK_TTL, "lock-ttl", "COUPON_LOCK_TTL_MS", "MS", 10, 600000,
     "lock validity (default 2000)"},
    {OPT_LOCK_WAIT, "lock-wait", "COUPON_LOCK_WAIT_MS", "MS", 0, 60000,
     "longest wait for the lock before answering 503 / 1005 (default 1000)"},
    {OPT_LOCK_RETRY, "lock-retry-ms", "COUPON_LOCK_RETRY_MS", "MS", 1, 1000,
     "pause between lock attempts while it is taken, +- the same jitter (default 1)"},
    {OPT_LOCK_BATCH, "lock-batch", "COUPON_LOCK_BATCH", "N", 1, CONFIG_MAX_BATCH,
     "claims of one coupon this server may run under one lock acquisition, with one read and one write"
     " (group commit); 1 = a lock (and a fence) per claim (default 32)"},
    {OPT_REDIS_TIMEOUT, "redis-timeout-ms", "COUPON_REDIS_TIMEOUT_MS", "MS", 1, 60000,
     "per round-trip command timeout to the Redis nodes (default 200)"},
    {OPT_REDIS_CONNECT, "redis-connect-ms", "COUPON_REDIS_CONNECT_MS", "MS", 1, 60000,
     "per node connect timeout (default 200)"},
    {OPT_STRATEGY, "strategy", "COUPON_STRATEGY", "NAME", 1, 0,
     "claim strategy: redlock (default), none (unsafe read-then-write), atomic-sql"},
    {OPT_THREADS, "threads", "COUPON_THREADS", "N", 1, 256,
     "request worker threads (default 32; 8 with atomic-sql)"},
    {OPT_ADMIN_TOKEN, "admin-token", "COUPON_ADMIN_TOKEN", "TOKEN", 1, 0,
     "bearer token for the admin endpoints (unset: they answer 403)"},
    {OPT_WORK_US, "work-us", "COUPON_WORK_US", "US", 0, 10000000,
     "the business step of the critical section, between the stock read and the write (default 0)"},
    {OPT_UNSAFE_DELAY, "unsafe-delay-us", "COUPON_UNSAFE_DELAY_US", "US", 0, 10000000,
     "alias of --work-us"},
    {OPT_FENCE, "fence", "COUPON_FENCE", "off|write|full", 1, 0,
     "storage fencing of the lock strategies: none, on the write only, or on the read and the write"
     " (default full)"},
    {OPT_FAULT_PAUSE, "fault-pause-ms", "COUPON_FAULT_PAUSE", "MS[:EVERY]", 1, 0,
     "fault injection: stall MS inside the critical section, after the read, on every EVERY-th claim"
     " of this server (default EVERY 1; off unless given)"},
    {OPT_DB_BUSY, "db-busy-ms", "COUPON_DB_BUSY_MS", "MS", 1, 600000,
     "SQLite busy timeout (default 5000)"},
    {OPT_MAX_BODY, "max-body-bytes", "COUPON_MAX_BODY_BYTES", "N", 1, 1048576,
     "largest request body (default 16384); larger: 413 / 1009"},
    {OPT_MAX_HEADER, "max-header-bytes", "COUPON_MAX_HEADER_BYTES", "N", 256, 32768,
     "largest request line + headers (default 8192); larger: 431 / 1009"},
    {OPT_MAX_CONNS, "max-connections", "COUPON_MAX_CONNECTIONS", "N", 1, 100000,
     "simultaneous connections (default 1024)"},
    {OPT_CONN_TIMEOUT, "conn-timeout-s", "COUPON_CONN_TIMEOUT_S", "S", 1, 3600,
     "idle connection timeout (default 30)"},
    {OPT_GRACE, "shutdown-grace-ms", "COUPON_SHUTDOWN_GRACE_MS", "MS", 0, 600000,
     "on SIGINT/SIGTERM, longest wait for requests in flight (default 5000)"},
    {OPT_HELP, "help", NULL, NULL, 1, 0, "print this help and exit"},
};
#define N_OPTS (sizeof OPTS / sizeof OPTS[0])

static void set_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}

/* Strict decimal: digits only (no sign, no blanks: strtoll would accept
 * " +5"), fully consumed, no overflow, inside [lo, hi]. */
static int parse_range(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int replace_str(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (copy == NULL)
        return -1;
    free(*slot);
    *slot = copy;
    return 0;
}

/* HOST:PORT or [V6]:PORT. */
static int parse_listen(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    const char *host = v, *host_end = NULL, *port_s = NULL;
    char hostbuf[256];
    int64_t port = 0;

    if (v[0] == '[') {
        host = v + 1;
        host_end = strchr(host, ']');
        if (host_end == NULL || host_end[1] != ':')
            goto bad;
        port_s = host_end + 2;
    } else {
        host_end = strrchr(v, ':');
        /* A bare IPv6 address would split at the wrong colon. */
        if (host_end == NULL || memchr(v, ':', (size_t)(host_end - v)) != NULL)
            goto bad;
        port_s = host_end + 1;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof hostbuf || parse_range(port_s, 0, 65535, &port) != 0)
        goto bad;
    memcpy(hostbuf, host, hlen);
    hostbuf[hlen] = '\0';
    if (replace_str(&cfg->listen_host, hostbuf) != 0) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    cfg->listen_port = (int)port;
    return 0;
bad:
    set_err(errbuf, errlen, "%s: expected HOST:PORT with PORT in 0..65535, got '%s'", who, v);
    return -1;
}

static int valid_redis_addr(const char *a, size_t len)
{
    if (len == 0 || len > 255)
        return 0;
    if (len > 5 && strncmp(a, "unix:", 5) == 0)
        return 1;
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (a[i] == ':')
            colon = a + i;
    if (colon == NULL || colon == a)
        return 0;
    char port[8];
    size_t plen = len - (size_t)(colon + 1 - a);
    if (plen == 0 || plen >= sizeof port)
        return 0;
    memcpy(port, colon + 1, plen);
    port[plen] = '\0';
    int64_t p = 0;
    return parse_range(port, 1, 65535, &p) == 0;
}

static int parse_redis(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    char *list[CONFIG_MAX_REDIS] = {NULL};
    size_t n = 0;
    int result = -1;
    const char *p = v;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!valid_redis_addr(p, len)) {
            set_err(errbuf, errlen, "%s: bad Redis address '%.*s' (expected host:port or unix:/path)",
                    who, (int)(len > 255 ? 255 : len), p);
            goto out;
        }
        if (n == CONFIG_MAX_REDIS) {
            set_err(errbuf, errlen, "%s: at most %d Redis addresses", who, CONFIG_MAX_REDIS);
            goto out;
        }
        list[n] = strndup(p, len);
        if (list[n] == NULL) {
            set_err(errbuf, errlen, "out of memory");
            goto out;
        }
        n++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    for (size_t i = 0; i < cfg->n_redis; i++) {
        free(cfg->redis[i]);
        cfg->redis[i] = NULL;
    }
    memcpy(cfg->redis, list, sizeof list);
    cfg->n_redis = n;
    n = 0; /* ownership moved into cfg */
    result = 0;
out:
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    return result;
}

/* MS[:EVERY]: MS in 0..600000 (0 = off), EVERY in 1..1000000. */
static int parse_fault_pause(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    char ms_s[16];
    const char *colon = strchr(v, ':');
    size_t len = colon != NULL ? (size_t)(colon - v) : strlen(v);
    int64_t ms = 0, every = 1;

    if (len == 0 || len >= sizeof ms_s)
        goto bad;
    memcpy(ms_s, v, len);
    ms_s[len] = '\0';
    if (parse_range(ms_s, 0, 600000, &ms) != 0)
        goto bad;
    if (colon != NULL && parse_range(colon + 1, 1, 1000000, &every) != 0)
        goto bad;
    cfg->fault_pause_ms = (unsigned)ms;
    cfg->fault_pause_every = (unsigned)every;
    return 0;
bad:
    set_err(errbuf, errlen, "%s: expected MS[:EVERY] with MS in 0..600000 and EVERY in 1..1000000, got '%s'",
            who, v);
    return -1;
}

static int apply(app_config *cfg, const opt_desc *o, const char *v, int from_env,
                 char *errbuf, size_t errlen)
{
    char who[64];
    int64_t num = 0;

    if (from_env)
        snprintf(who, sizeof who, "%s", o->env);
    else
        snprintf(who, sizeof who, "--%s", o->name);

    if (o->lo <= o->hi) {
        if (parse_range(v, o->lo, o->hi, &num) != 0) {
            set_err(errbuf, errlen, "%s: expected an integer in %lld..%lld, got '%s'", who,
                    (long long)o->lo, (long long)o->hi, v);
            return -1;
        }
    } else if (v[0] == '\0') {
        set_err(errbuf, errlen, "%s: empty value", who);
        return -1;
    }

    switch (o->id) {
    case OPT_LISTEN:
        return parse_listen(cfg, v, errbuf, errlen, who);
    case OPT_REDIS:
        return parse_redis(cfg, v, errbuf, errlen, who);
    case OPT_STRATEGY:
        if (strategy_by_name(v) == NULL) {
            set_err(errbuf, errlen, "%s: unknown strategy '%s' (known: %s)", who, v, strategy_names());
            return -1;
        }
        break;
    case OPT_FENCE: {
        db_fence_mode m;
        if (db_fence_mode_parse(v, &m) != 0) {
            set_err(errbuf, errlen, "%s: expected off, write or full, got '%s'", who, v);
            return -1;
        }
        cfg->fence = m;
        return 0;
    }
    case OPT_FAULT_PAUSE:
        return parse_fault_pause(cfg, v, errbuf, errlen, who);
    case OPT_ADMIN_TOKEN:
        if (strlen(v) > 256) {
            set_err(errbuf, errlen, "%s: token longer than 256 bytes", who);
            return -1;
        }
        break;
    default:
        break;
    }

    char **str_slot = NULL;
    switch (o->id) {
    case OPT_DB: str_slot = &cfg->db_path; break;
    case OPT_STRATEGY: str_slot = &cfg->strategy; break;
    case OPT_ADMIN_TOKEN: str_slot = &cfg->admin_token; break;
    case OPT_LOCK_TTL: cfg->lock_ttl_ms = (uint32_t)num; break;
    case OPT_LOCK_WAIT: cfg->lock_wait_ms = (int)num; break;
    case OPT_LOCK_RETRY: cfg->lock_retry_ms = (int)num; break;
    case OPT_LOCK_BATCH: cfg->lock_batch = (int)num; break;
    case OPT_REDIS_TIMEOUT: cfg->redis_timeout_ms = (int)num; break;
    case OPT_REDIS_CONNECT: cfg->redis_connect_ms = (int)num; break;
    case OPT_THREADS: cfg->threads = (int)num; break;
    case OPT_WORK_US:
    case OPT_UNSAFE_DELAY: cfg->work_us = (unsigned)num; break;
    case OPT_DB_BUSY: cfg->db_busy_ms = (int)num; break;
    case OPT_MAX_BODY: cfg->max_body = (size_t)num; break;
    case OPT_MAX_HEADER: cfg->max_header = (size_t)num; break;
    case OPT_MAX_CONNS: cfg->max_connections = (unsigned)num; break;
    case OPT_CONN_TIMEOUT: cfg->conn_timeout_s = (unsigned)num; break;
    case OPT_GRACE: cfg->shutdown_grace_ms = (int)num; break;
    default: break;
    }
    if (str_slot != NULL && replace_str(str_slot, v) != 0) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void print_help(const char *prog)
{
    printf("usage: %s [options]\n\nEach option can also be set by the environment variable shown;"
           " the command line wins.\n\n", prog);
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_desc *o = &OPTS[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-32s %s%s%s%s\n", left, o->help, o->env ? " [" : "", o->env ? o->env : "",
               o->env ? "]" : "");
    }
    fflush(stdout);
}

config_result config_load(app_config *cfg, int argc, char **argv, char *errbuf, size_t errlen)
{
    struct option longopts[N_OPTS + 1];

    memset(cfg, 0, sizeof *cfg);
    cfg->listen_port = 8080;
    cfg->lock_ttl_ms = 2000;
    cfg->lock_wait_ms = 1000;
    cfg->lock_retry_ms = 1;
    /* A batch runs up to 32 queued claims of one hot coupon in one section
     * under one acquisition (one read, one write, one fence): the lock's
     * round trips and the business step are paid once per batch. One lock
     * per claim reaches about a fifth of atomic-sql's rate (see README). */
    cfg->lock_batch = 32;
    cfg->redis_timeout_ms = 200;
    cfg->redis_connect_ms = 200;
    cfg->threads = 0; /* chosen after the strategy is known, below */
    cfg->work_us = 0;
    /* Full fencing by default: anything less lets a holder whose lease ran
     * out sell from a stale read (docs/fencing.md). */
    cfg->fence = DB_FENCE_FULL;
    cfg->fault_pause_ms = 0;
    cfg->fault_pause_every = 1;
    cfg->db_busy_ms = 5000;
    cfg->max_body = 16384;
    cfg->max_header = 8192;
    cfg->max_connections = 1024;
    cfg->conn_timeout_s = 30;
    cfg->shutdown_grace_ms = 5000;
    if (replace_str(&cfg->listen_host, "127.0.0.1") != 0 || replace_str(&cfg->db_path, "coupon.db") != 0 ||
        replace_str(&cfg->strategy, "redlock") != 0 || (cfg->redis[0] = strdup("127.0.0.1:6379")) == NULL) {
        set_err(errbuf, errlen, "out of memory");
        return CONFIG_ERROR;
    }
    cfg->n_redis = 1;

    /* An empty variable counts as unset, as shells make "VAR=" easy to leave behind. */
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *v = OPTS[i].env ? getenv(OPTS[i].env) : NULL;
        if (v != NULL && v[0] != '\0' && apply(cfg, &OPTS[i], v, 1, errbuf, errlen) != 0)
            return CONFIG_ERROR;
    }

    for (size_t i = 0; i < N_OPTS; i++) {
        longopts[i].name = OPTS[i].name;
        longopts[i].has_arg = OPTS[i].arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = (int)OPTS[i].id;
    }
    memset(&longopts[N_OPTS], 0, sizeof longopts[N_OPTS]);

    /* Our own one-line messages instead of getopt's, and a fresh scan. */
    opterr = 0;
    optind = 1;
    for (;;) {
        int prev = optind;
        int c = getopt_long(argc, argv, ":", longopts, NULL);
        if (c == -1)
            break;
        const char *arg0 = prev < argc ? argv[prev] : "?";
        if (c == '?') {
            set_err(errbuf, errlen, "unknown option '%s' (see --help)", arg0);
            return CONFIG_ERROR;
        }
        if (c == ':') {
            set_err(errbuf, errlen, "option '%s' needs a value", arg0);
            return CONFIG_ERROR;
        }
        if (c == OPT_HELP) {
            print_help(argv[0]);
            return CONFIG_HELP;
        }
        const opt_desc *o = NULL;
        for (size_t i = 0; i < N_OPTS; i++)
            if ((int)OPTS[i].id == c)
                o = &OPTS[i];
        if (o == NULL || apply(cfg, o, optarg, 0, errbuf, errlen) != 0) {
            if (o == NULL)
                set_err(errbuf, errlen, "unknown option '%s'", arg0);
            return CONFIG_ERROR;
        }
    }
    if (optind < argc) {
        set_err(errbuf, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return CONFIG_ERROR;
    }
    /* Claims waiting for the lock wait in worker threads, so the threads
     * bound the batch: 32 lets batches fill. atomic-sql's claims contend on
     * SQLite's write lock instead, where more threads only add switching
     * (measured: 9.3k claims/s with 8, 6.5k with 32). */
    if (cfg->threads == 0)
        cfg->threads = strcmp(cfg->strategy, "atomic-sql") == 0 ? 8 : 32;
    /* MHD shares the connection limit out among its pool threads; fewer
     * connections than threads would leave a thread with none. */
    if (cfg->max_connections < (unsigned)cfg->threads) {
        set_err(errbuf, errlen, "--max-connections (%u) must be at least --threads (%d)", cfg->max_connections,
                cfg->threads);
        return CONFIG_ERROR;
    }
    return CONFIG_OK;
}

void config_free(app_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->listen_host);
    free(cfg->db_path);
    free(cfg->strategy);
    free(cfg->admin_token);
    for (size_t i = 0; i < cfg->n_redis; i++)
        free(cfg->redis[i]);
    memset(cfg, 0, sizeof *cfg);
}

void config_format_hostport(const char *host, int port, char *out, size_t outlen)
{
    if (strchr(host, ':') != NULL)
        snprintf(out, outlen, "[%s]:%d", host, port);
    else
        snprintf(out, outlen, "%s:%d", host, port);
}
