/* args.c - dlock-bench command line: the option table (common/'s parser),
 * the checks across options and the usage text. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* The command line as given. The parser writes ints; the config's uint32_t
 * ms fields are filled once the values are checked. */
typedef struct bench_cmdline {
    bench_config cfg; /* ports, workers, duration, mode and retry go straight in */
    int hold_ms;
    int ttl_ms;
    int help;
    int version;
} bench_cmdline;

static int parse_ports(const char *s, void *field, char *err, size_t errlen)
{
    bench_config *cfg = field;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return cm_fail(err, errlen, "list too long");
    memcpy(buf, s, strlen(s) + 1);
    cfg->n_ports = 0;
    /* strsep, not strtok: "6400,,6401" must be an error, not two ports. */
    char *rest = buf;
    char *item;
    while ((item = strsep(&rest, ",")) != NULL) {
        int port;
        if (cfg->n_ports == DLOCK_MAX_NODES)
            return cm_fail(err, errlen, "at most %d ports", DLOCK_MAX_NODES);
        if (cm_parse_int(item, 1, 65535, &port) != 0)
            return cm_fail(err, errlen, "'%s' is not an integer in 1..65535", item);
        for (size_t i = 0; i < cfg->n_ports; i++) {
            /* The same node twice would count one vote twice: a fake quorum. */
            if (cfg->ports[i] == port)
                return cm_fail(err, errlen, "port %d given twice", port);
        }
        cfg->ports[cfg->n_ports++] = port;
    }
    return 0;
}

/* The names on the command line and in the JSON line, by enum value. */
static const char *const mode_names[] = {
    [BENCH_UNCONTENDED] = "uncontended", [BENCH_CONTENDED] = "contended", [BENCH_RAW] = "raw"};
static const char *const retry_names[] = {[BENCH_RETRY_DEFAULT] = "default",
                                          [BENCH_RETRY_TUNED] = "tuned", [BENCH_RETRY_POLL] = "poll"};
#define N_MODES (sizeof mode_names / sizeof mode_names[0])
#define N_RETRIES (sizeof retry_names / sizeof retry_names[0])

/* Index of s in names (exact match), or -1. */
static int pick(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return -1;
}

static int parse_mode(const char *s, void *field, char *err, size_t errlen)
{
    int i = pick(s, mode_names, N_MODES);
    if (i < 0)
        return cm_fail(err, errlen, "expected uncontended, contended or raw, got '%s'", s);
    *(bench_mode *)field = (bench_mode)i;
    return 0;
}

static int parse_retry(const char *s, void *field, char *err, size_t errlen)
{
    int i = pick(s, retry_names, N_RETRIES);
    if (i < 0)
        return cm_fail(err, errlen, "expected default or tuned, got '%s'", s);
    *(bench_retry *)field = (bench_retry)i;
    return 0;
}

#define AT(field) offsetof(bench_cmdline, field)

static const cm_option options[] = {
    {.name = "ports", .kind = CM_ARG_STRING, .offset = AT(cfg), .convert = parse_ports,
     .required = 1, .help = "Redis ports on 127.0.0.1; one = single instance, several = Redlock"},
    {.name = "workers", .kind = CM_ARG_INT, .offset = AT(cfg.workers), .lo = 1,
     .hi = BENCH_MAX_WORKERS,
     .help = "threads, each with its own client and connections (1.." STR(BENCH_MAX_WORKERS)
             ", default 1)"},
    {.name = "duration", .kind = CM_ARG_DOUBLE, .offset = AT(cfg.duration_s), .dlo = 0.0,
     .dlo_open = 1, .dhi = BENCH_MAX_DURATION_S,
     .help = "seconds to run (> 0, default 5)"},
    {.name = "hold", .kind = CM_ARG_INT, .offset = AT(hold_ms), .lo = 0, .hi = (int)BENCH_MAX_MS,
     .help = "ms spent inside the lock per cycle (default 0)"},
    {.name = "mode", .kind = CM_ARG_STRING, .offset = AT(cfg.mode), .convert = parse_mode,
     .help = "uncontended: worker i locks bench:lock:<i>;\n"
             "contended: all workers fight for bench:lock and increment bench:counter\n"
             "with a non-atomic GET/SET inside it (counter must equal successes);\n"
             "raw: plain hiredis SET NX PX + EVALSHA release (the 2-round-trip limit)"},
    {.name = "retry", .kind = CM_ARG_STRING, .offset = AT(cfg.retry), .convert = parse_retry,
     .help = "default: library defaults (wake on release);\n"
             "tuned: fixed 3 ms +- 2 ms polling; poll: library backoff, wake_on_release off"},
    {.name = "ttl", .kind = CM_ARG_INT, .offset = AT(ttl_ms), .lo = 1, .hi = (int)BENCH_MAX_MS,
     .help = "lock TTL in ms, also the longest wait per acquisition (default 2000)"},
    /* Not listed in the usage text, which is what --help prints. */
    {.name = "help", .short_name = 'h', .kind = CM_ARG_HELP, .offset = AT(help)},
    {.name = "version", .kind = CM_ARG_HELP, .offset = AT(version)},
};

static const cm_args_spec spec = {
    .opts = options,
    .n_opts = sizeof options / sizeof options[0],
    .usage = "usage: dlock-bench --ports P[,P...] [--workers N] [--duration S] [--hold MS]\n"
             "                   [--mode uncontended|contended|raw] [--retry default|tuned|poll] [--ttl MS]\n"
             "       dlock-bench -h|--help | --version\n"
             "\n",
    .epilogue = "\n"
                "Prints one JSON line. Exit 0: run done, no violation; 1: violations or Redis error;\n"
                "2: usage error.\n",
    .help_column = 14,
};

int bench_parse_args(int argc, char **argv, bench_config *cfg)
{
    bench_cmdline cl;
    char err[512];
    memset(&cl, 0, sizeof cl);
    cl.cfg.workers = 1;
    cl.cfg.duration_s = 5.0;
    cl.cfg.mode = BENCH_UNCONTENDED;
    cl.cfg.retry = BENCH_RETRY_DEFAULT;
    cl.hold_ms = 0;
    cl.ttl_ms = 2000;

    int rc = cm_args_parse(&spec, argc, argv, &cl, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "dlock-bench: %s\n", err);
        return -1;
    }
    if (rc > 0 && cl.version) {
        /* COUPON_VERSION: the one CMake project version (bench/CMakeLists.txt). */
        printf("dlock-bench %s\n", COUPON_VERSION);
        return fflush(stdout) == 0 ? 1 : -1;
    }
    if (rc > 0) {
        if (cm_args_usage(stdout, &spec) != 0) {
            fprintf(stderr, "dlock-bench: cannot write the usage text\n");
            return -1;
        }
        return 1;
    }
    /* A hold as long as the TTL lets the lock expire while the holder is
     * still inside, so the bench would measure an unsafe configuration. */
    if (cl.hold_ms >= cl.ttl_ms) {
        fprintf(stderr, "dlock-bench: --ttl (%d ms) must be larger than --hold (%d ms)\n",
                cl.ttl_ms, cl.hold_ms);
        return -1;
    }
    *cfg = cl.cfg;
    cfg->hold_ms = (uint32_t)cl.hold_ms;
    cfg->ttl_ms = (uint32_t)cl.ttl_ms;
    return 0;
}

const char *bench_mode_name(bench_mode m)
{
    return (size_t)m < N_MODES ? mode_names[m] : "?";
}

const char *bench_retry_name(const bench_config *cfg)
{
    /* Raw mode never retries: a failed SET NX is counted, not repeated. */
    if (cfg->mode == BENCH_RAW)
        return "none";
    return (size_t)cfg->retry < N_RETRIES ? retry_names[cfg->retry] : "?";
}
