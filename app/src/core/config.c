/* config.c - coupon-server options: defaults, COUPON_* environment variables,
 * long options, and strict validation (every number fully consumed, in
 * range). Everything here is driven by the COUPON_OPTIONS table (config.h). */
#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"

enum opt_id {
#define OPT_ENUM(kind, ctype, field, name, env, arg, lo, hi, def, help) OPT_##kind##_##field,
    COUPON_OPTIONS(OPT_ENUM)
#undef OPT_ENUM
    OPT_HELP,
    OPT_VERSION,
    N_OPTS
};

typedef struct opt_desc {
    const char *name; /* long option, without "--" */
    const char *env;  /* environment variable, or NULL */
    const char *arg;  /* argument name for --help, NULL: a flag */
    int64_t lo, hi;   /* range of a numeric option (lo > hi: not numeric) */
    int numeric;
    const char *help;
} opt_desc;

static const opt_desc OPTS[N_OPTS] = {
#define OPT_ROW(kind, ctype, field, name, env, arg, lo, hi, def, help) \
    [OPT_##kind##_##field] = {name, env, arg, lo, hi, OPT_NUMERIC_##kind, help},
#define OPT_NUMERIC_NUM 1
#define OPT_NUMERIC_ALIAS 1
#define OPT_NUMERIC_STR 0
#define OPT_NUMERIC_CUSTOM 0
    COUPON_OPTIONS(OPT_ROW)
#undef OPT_ROW
    [OPT_HELP] = {"help", NULL, NULL, 1, 0, 0, "print this help and exit (also -h)"},
    [OPT_VERSION] = {"version", NULL, NULL, 1, 0, 0, "print the version and exit"},
};

static void set_err(char *errbuf, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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

/* ---- the CUSTOM rows: parse_<field>(cfg, value, errbuf, errlen, who) ---- */

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

/* A comma-separated list, each address checked by libdlock's own parser, so
 * what passes here is exactly what dlock_client_new will accept. */
static int parse_redis(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    char *list[CONFIG_MAX_REDIS] = {NULL};
    char why[DLOCK_ERRSTR_LEN];
    size_t n = 0;
    int result = -1;
    const char *p = v;

    for (;;) {
        /* libdlock's split: a sentinel:// address keeps its own commas. */
        size_t len = dlock_addr_span(p);
        const char *comma = p[len] == ',' ? p + len : NULL;
        if (n == CONFIG_MAX_REDIS) {
            set_err(errbuf, errlen, "%s: at most %d Redis addresses", who, CONFIG_MAX_REDIS);
            goto out;
        }
        list[n] = strndup(p, len);
        if (list[n] == NULL) {
            set_err(errbuf, errlen, "out of memory");
            goto out;
        }
        if (dlock_addr_check(list[n], why, sizeof why) != DLOCK_OK) {
            set_err(errbuf, errlen, "%s: bad Redis address '%.*s': %s", who, (int)(len > 255 ? 255 : len), p, why);
            n++; /* freed below */
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

static const config_strategy *find_strategy(const app_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_strategies; i++)
        if (strcmp(cfg->strategies[i].name, name) == 0)
            return &cfg->strategies[i];
    return NULL;
}

const config_strategy *config_strategy_of(const app_config *cfg)
{
    return cfg->strategy != NULL ? find_strategy(cfg, cfg->strategy) : NULL;
}

static int parse_strategy(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    char names[512];
    size_t off = 0;

    if (find_strategy(cfg, v) == NULL) {
        names[0] = '\0';
        for (size_t i = 0; i < cfg->n_strategies && off < sizeof names; i++) {
            int n = snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", cfg->strategies[i].name);
            if (n < 0)
                break;
            off += (size_t)n;
        }
        set_err(errbuf, errlen, "%s: unknown strategy '%s' (known: %s)", who, v, names);
        return -1;
    }
    if (replace_str(&cfg->strategy, v) != 0) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* The token's characters: RFC 6750's token68, the only ones a Bearer
 * header may carry (routes_admin.c refuses any other), so a token outside
 * them could never be presented. */
#define TOKEN68 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="

static int parse_admin_token(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    size_t len = strlen(v);

    /* A token short enough to guess is refused: the per-address back-off
     * bounds one address, not a guesser with many (admin_guard.h). */
    if (len < CONFIG_MIN_ADMIN_TOKEN) {
        set_err(errbuf, errlen, "%s: the token has %zu characters; it needs at least %d, random (make one with: "
                "openssl rand -hex 16)", who, len, CONFIG_MIN_ADMIN_TOKEN);
        return -1;
    }
    if (len > 256) {
        set_err(errbuf, errlen, "%s: token longer than 256 bytes", who);
        return -1;
    }
    if (strspn(v, TOKEN68) != len) {
        set_err(errbuf, errlen, "%s: the token may hold only letters, digits and -._~+/= (a Bearer header "
                "carries nothing else)", who);
        return -1;
    }
    if (replace_str(&cfg->admin_token, v) != 0) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int parse_fence(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    if (db_fence_mode_parse(v, &cfg->fence) != 0) {
        set_err(errbuf, errlen, "%s: expected off, write or full, got '%s'", who, v);
        return -1;
    }
    return 0;
}

/* MS[:EVERY]: MS in 0..600000 (0 = off), EVERY in 1..1000000, or the word
 * "signal" (stored as EVERY 0): the next claim after each SIGUSR1 stalls. */
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
    if (colon != NULL && strcmp(colon + 1, "signal") == 0)
        every = 0;
    else if (colon != NULL && parse_range(colon + 1, 1, 1000000, &every) != 0)
        goto bad;
    cfg->fault_pause_ms = (unsigned)ms;
    cfg->fault_pause_every = (unsigned)every;
    return 0;
bad:
    set_err(errbuf, errlen, "%s: expected MS[:EVERY|:signal] with MS in 0..600000 and EVERY in 1..1000000, got '%s'",
            who, v);
    return -1;
}

static int parse_log_level(app_config *cfg, const char *v, char *errbuf, size_t errlen, const char *who)
{
    if (log_level_parse(v, &cfg->log_level) != 0) {
        set_err(errbuf, errlen, "%s: expected error, warn, info or debug, got '%s'", who, v);
        return -1;
    }
    return 0;
}

/* ---- one value onto its row ---- */

static int store_str(char **slot, const char *v, char *errbuf, size_t errlen)
{
    if (replace_str(slot, v) != 0) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* who: "--name" or the variable's name, for the message. */
static int apply(app_config *cfg, enum opt_id id, const char *v, const char *who, char *errbuf, size_t errlen)
{
    const opt_desc *o = &OPTS[id];
    int64_t num = 0;

    if (o->numeric) {
        if (parse_range(v, o->lo, o->hi, &num) != 0) {
            set_err(errbuf, errlen, "%s: expected an integer in %lld..%lld, got '%s'", who, (long long)o->lo,
                    (long long)o->hi, v);
            return -1;
        }
    } else if (v[0] == '\0') {
        set_err(errbuf, errlen, "%s: empty value", who);
        return -1;
    }

    switch (id) {
#define APPLY_NUM(ctype, field) cfg->field = (ctype)num; return 0;
#define APPLY_ALIAS(ctype, field) APPLY_NUM(ctype, field)
#define APPLY_STR(ctype, field) return store_str(&cfg->field, v, errbuf, errlen);
#define APPLY_CUSTOM(ctype, field) return parse_##field(cfg, v, errbuf, errlen, who);
#define APPLY_CASE(kind, ctype, field, name, env, arg, lo, hi, def, help) \
    case OPT_##kind##_##field: APPLY_##kind(ctype, field)
        COUPON_OPTIONS(APPLY_CASE)
#undef APPLY_CASE
#undef APPLY_NUM
#undef APPLY_ALIAS
#undef APPLY_STR
#undef APPLY_CUSTOM
    case OPT_HELP:
    case OPT_VERSION:
    case N_OPTS:
        break;
    }
    return 0;
}

/* A STR or CUSTOM default goes through the same path as a given value (a
 * CUSTOM one is parsed like the command line's), so a default cannot hold
 * what the option itself would refuse. NULL: unset. */
static int apply_default(app_config *cfg, enum opt_id id, const char *def, char *errbuf, size_t errlen)
{
    char who[64];

    if (def == NULL)
        return 0;
    snprintf(who, sizeof who, "default of --%s", OPTS[id].name);
    return apply(cfg, id, def, who, errbuf, errlen);
}

static int apply_defaults(app_config *cfg, char *errbuf, size_t errlen)
{
#define DEFAULT_NUM(kind, field, def) cfg->field = def;
#define DEFAULT_ALIAS(kind, field, def)
#define DEFAULT_STR(kind, field, def)                                            \
    if (apply_default(cfg, OPT_##kind##_##field, def, errbuf, errlen) != 0) \
        return -1;
#define DEFAULT_CUSTOM(kind, field, def) DEFAULT_STR(kind, field, def)
#define DEFAULT_ROW(kind, ctype, field, name, env, arg, lo, hi, def, help) DEFAULT_##kind(kind, field, def)
    COUPON_OPTIONS(DEFAULT_ROW)
#undef DEFAULT_ROW
#undef DEFAULT_NUM
#undef DEFAULT_ALIAS
#undef DEFAULT_STR
#undef DEFAULT_CUSTOM
    if (cfg->fault_pause_every == 0)
        cfg->fault_pause_every = 1; /* --fault-pause-ms unset: off, EVERY 1 */
    return 0;
}

static void text_str(char *out, size_t outlen, const char *def)
{
    if (def != NULL)
        snprintf(out, outlen, " (default %s)", def);
}

/* A numeric default outside the range means "decided later" (its help says how). */
static void text_num(char *out, size_t outlen, int64_t def, int64_t lo, int64_t hi)
{
    if (def >= lo && def <= hi)
        snprintf(out, outlen, " (default %lld)", (long long)def);
}

/* The "(default X)" of a row, from the table. */
static void default_text(enum opt_id id, char *out, size_t outlen)
{
    out[0] = '\0';
    switch (id) {
#define TEXT_NUM(def, lo, hi) text_num(out, outlen, (int64_t)(def), (int64_t)(lo), (int64_t)(hi));
#define TEXT_ALIAS(def, lo, hi)
#define TEXT_STR(def, lo, hi) text_str(out, outlen, def);
#define TEXT_CUSTOM(def, lo, hi) TEXT_STR(def, lo, hi)
#define TEXT_CASE(kind, ctype, field, name, env, arg, lo, hi, def, help) \
    case OPT_##kind##_##field: TEXT_##kind(def, lo, hi) break;
        COUPON_OPTIONS(TEXT_CASE)
#undef TEXT_CASE
#undef TEXT_NUM
#undef TEXT_ALIAS
#undef TEXT_STR
#undef TEXT_CUSTOM
    case OPT_HELP:
    case OPT_VERSION:
    case N_OPTS:
        break;
    }
}

static void print_help(const app_config *cfg, const char *prog)
{
    printf("usage: %s [options]\n\nEach option can also be set by the environment variable shown;"
           " the command line wins.\n\n", prog);
    for (size_t i = 0; i < N_OPTS; i++) {
        const opt_desc *o = &OPTS[i];
        char left[64], def[96];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        default_text((enum opt_id)i, def, sizeof def);
        printf("  %-32s %s%s%s%s%s\n", left, o->help, def, o->env ? " [" : "", o->env ? o->env : "",
               o->env ? "]" : "");
        /* The strategies come from their registry, each with its threads. */
        if (i == OPT_CUSTOM_strategy)
            for (size_t k = 0; k < cfg->n_strategies; k++) {
                char workers[48] = "";
                if (cfg->strategies[k].default_claim_workers > 0)
                    snprintf(workers, sizeof workers, ", claim workers %d", cfg->strategies[k].default_claim_workers);
                printf("  %-32s   %-20s %s (threads %d%s)\n", "", cfg->strategies[k].name, cfg->strategies[k].summary,
                       cfg->strategies[k].default_threads, workers);
            }
    }
    fflush(stdout);
}

/* ---- the whole load ---- */

static config_result load_env(app_config *cfg, char *errbuf, size_t errlen)
{
    /* An empty variable counts as unset, as shells make "VAR=" easy to leave behind. */
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *v = OPTS[i].env ? getenv(OPTS[i].env) : NULL;
        if (v != NULL && v[0] != '\0' && apply(cfg, (enum opt_id)i, v, OPTS[i].env, errbuf, errlen) != 0)
            return CONFIG_ERROR;
    }
    return CONFIG_OK;
}

static config_result load_argv(app_config *cfg, int argc, char **argv, char *errbuf, size_t errlen)
{
    struct option longopts[N_OPTS + 1];

    for (size_t i = 0; i < N_OPTS; i++) {
        longopts[i].name = OPTS[i].name;
        longopts[i].has_arg = OPTS[i].arg ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = (int)i + 256; /* clear of getopt's '?' and ':' */
    }
    memset(&longopts[N_OPTS], 0, sizeof longopts[N_OPTS]);

    /* Our own one-line messages instead of getopt's, and a fresh scan. */
    opterr = 0;
    optind = 1;
    for (;;) {
        int prev = optind;
        int c = getopt_long(argc, argv, ":h", longopts, NULL);
        if (c == -1)
            break;
        const char *arg0 = prev < argc ? argv[prev] : "?";
        if (c == '?') {
            if (optopt > 0 && optopt < 256)
                set_err(errbuf, errlen, "unknown option '-%c' (see --help)", optopt);
            else
                set_err(errbuf, errlen, "unknown option '%s' (see --help)", arg0);
            return CONFIG_ERROR;
        }
        if (c == ':') {
            set_err(errbuf, errlen, "option '%s' needs a value", arg0);
            return CONFIG_ERROR;
        }
        enum opt_id id = c == 'h' ? OPT_HELP : (enum opt_id)(c - 256);
        if (id == OPT_HELP) {
            print_help(cfg, argv[0]);
            return CONFIG_HELP;
        }
        if (id == OPT_VERSION) {
            /* COUPON_VERSION: the one CMake project version (app/CMakeLists.txt). */
            printf("coupon-server %s\n", COUPON_VERSION);
            fflush(stdout);
            return CONFIG_HELP;
        }
        char who[64];
        snprintf(who, sizeof who, "--%s", OPTS[id].name);
        if (apply(cfg, id, optarg, who, errbuf, errlen) != 0)
            return CONFIG_ERROR;
    }
    if (optind < argc) {
        set_err(errbuf, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return CONFIG_ERROR;
    }
    return CONFIG_OK;
}

config_result config_load(app_config *cfg, const config_strategy *strategies, size_t n_strategies, int argc,
                          char **argv, char *errbuf, size_t errlen)
{
    config_result r;

    memset(cfg, 0, sizeof *cfg);
    cfg->strategies = strategies;
    cfg->n_strategies = n_strategies;
    if (apply_defaults(cfg, errbuf, errlen) != 0)
        return CONFIG_ERROR;
    /* The command line wins over the environment, which wins over the table. */
    if ((r = load_env(cfg, errbuf, errlen)) != CONFIG_OK)
        return r;
    if ((r = load_argv(cfg, argc, argv, errbuf, errlen)) != CONFIG_OK)
        return r;
    /* Unset --threads: the strategy's own default (its row in the registry). */
    if (cfg->threads == 0)
        cfg->threads = config_strategy_of(cfg)->default_threads;
    /* Unset --claim-workers: the strategy's own default, else as many as
     * --threads, so that as many claims of one coupon as before can wait
     * for (and batch under) one lock. */
    if (cfg->claim_workers == 0)
        cfg->claim_workers = config_strategy_of(cfg)->default_claim_workers > 0
                                 ? config_strategy_of(cfg)->default_claim_workers
                                 : cfg->threads;
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
    /* Every STR row's field, from the table: a new string option cannot be
     * forgotten here (--hold-log once was). */
#define FREE_NUM(field)
#define FREE_ALIAS(field)
#define FREE_CUSTOM(field)
#define FREE_STR(field) free(cfg->field);
#define FREE_ROW(kind, ctype, field, name, env, arg, lo, hi, def, help) FREE_##kind(field)
    COUPON_OPTIONS(FREE_ROW)
#undef FREE_ROW
#undef FREE_NUM
#undef FREE_ALIAS
#undef FREE_CUSTOM
#undef FREE_STR
    /* The CUSTOM rows' owned fields. */
    free(cfg->listen_host);
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

/* ---- the effective options, for the start-up log line ---- */

static void describe_custom(const app_config *cfg, enum opt_id id, char *out, size_t len)
{
    switch (id) {
    case OPT_CUSTOM_listen:
        config_format_hostport(cfg->listen_host, cfg->listen_port, out, len);
        return;
    case OPT_CUSTOM_redis: {
        size_t n = 0;
        out[0] = '\0';
        for (size_t i = 0; i < cfg->n_redis && n < len; i++) {
            char shown[512]; /* the start-up line never shows a redis:// password */
            int m = snprintf(out + n, len - n, "%s%s", i ? "," : "",
                             dlock_addr_shown(cfg->redis[i], shown, sizeof shown));
            n += m > 0 ? (size_t)m : 0;
        }
        return;
    }
    case OPT_CUSTOM_strategy:
        snprintf(out, len, "%s", cfg->strategy);
        return;
    case OPT_CUSTOM_admin_token:
        /* Never the token itself: logs travel further than secrets may. */
        snprintf(out, len, "%s", cfg->admin_token != NULL ? "set" : "unset");
        return;
    case OPT_CUSTOM_fence:
        snprintf(out, len, "%s", db_fence_mode_name(cfg->fence));
        return;
    case OPT_CUSTOM_fault_pause:
        if (cfg->fault_pause_ms == 0)
            snprintf(out, len, "off");
        else if (cfg->fault_pause_every == 0)
            snprintf(out, len, "%u:signal", cfg->fault_pause_ms);
        else
            snprintf(out, len, "%u:%u", cfg->fault_pause_ms, cfg->fault_pause_every);
        return;
    case OPT_CUSTOM_log_level:
        snprintf(out, len, "%s", log_level_name(cfg->log_level));
        return;
    default:
        snprintf(out, len, "?");
        return;
    }
}

void config_describe(const app_config *cfg, char *out, size_t outlen)
{
    size_t n = 0;
    char v[512];

    if (outlen == 0)
        return;
    out[0] = '\0';
#define DESCRIBE_NUM(kind, field) snprintf(v, sizeof v, "%lld", (long long)cfg->field);
#define DESCRIBE_ALIAS(kind, field) continue;
#define DESCRIBE_STR(kind, field) snprintf(v, sizeof v, "%s", cfg->field != NULL ? cfg->field : "unset");
#define DESCRIBE_CUSTOM(kind, field) describe_custom(cfg, OPT_##kind##_##field, v, sizeof v);
#define DESCRIBE_ROW(kind, ctype, field, name, env, arg, lo, hi, def, help)                      \
    do {                                                                                         \
        DESCRIBE_##kind(kind, field)                                                             \
        int m = snprintf(out + n, outlen - n, "%s%s=%s", n ? " " : "", name, v);                 \
        if (m < 0 || (size_t)m >= outlen - n)                                                    \
            return; /* full: the start line is cut, never overrun */                           \
        n += (size_t)m;                                                                          \
    } while (0);
    COUPON_OPTIONS(DESCRIBE_ROW)
#undef DESCRIBE_ROW
#undef DESCRIBE_NUM
#undef DESCRIBE_ALIAS
#undef DESCRIBE_STR
#undef DESCRIBE_CUSTOM
}
