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
    int counter_port; /* 0: not given */
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
static const char *const api_names[] = {[BENCH_API_BLOCKING] = "blocking", [BENCH_API_ASYNC] = "async"};
#define N_MODES (sizeof mode_names / sizeof mode_names[0])
#define N_RETRIES (sizeof retry_names / sizeof retry_names[0])
#define N_APIS (sizeof api_names / sizeof api_names[0])

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

static int parse_api(const char *s, void *field, char *err, size_t errlen)
{
    int i = pick(s, api_names, N_APIS);
    if (i < 0)
        return cm_fail(err, errlen, "expected blocking or async, got '%s'", s);
    *(bench_api *)field = (bench_api)i;
    return 0;
}

#define AT(field) offsetof(bench_cmdline, field)

static const cm_option options[] = {
    {.name = "ports", .kind = CM_ARG_STRING, .offset = AT(cfg), .convert = parse_ports,
     .required = 1, .help = "Redis ports on 127.0.0.1; one = single instance, several = Redlock"},
    {.name = "workers", .kind = CM_ARG_INT, .offset = AT(cfg.workers), .lo = 1,
     .hi = BENCH_MAX_WORKERS,
     .help = "workers (1.." STR(BENCH_MAX_WORKERS) ", default 1): with --api blocking one thread\n"
             "each, with its own client and connections; with --api async\n"
             "all on one loop in one thread, sharing one client"},
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
    {.name = "api", .kind = CM_ARG_STRING, .offset = AT(cfg.api), .convert = parse_api,
     .help = "blocking: dlock_acquire/dlock_release, one thread per worker;\n"
             "async: dlock_async_* on one libuv loop in one thread (the counter\n"
             "through hiredis's async API on the same loop); its waiters\n"
             "queue and are woken as blocking ones (--retry applies alike);\n"
             "not with --mode raw; needs a dlock-bench built with libuv\n"
             "(default blocking)"},
    {.name = "tls-ca", .kind = CM_ARG_STRING, .offset = AT(cfg.tls_ca), .metavar = "FILE",
     .help = "PEM file of the CAs that sign the nodes' certificates; given,\n"
             "every node is reached over TLS as rediss://127.0.0.1:P (the\n"
             "certificates must name IP 127.0.0.1); not with --mode raw"},
    {.name = "tls-cert", .kind = CM_ARG_STRING, .offset = AT(cfg.tls_cert), .metavar = "FILE",
     .help = "client certificate (PEM), with --tls-key and --tls-ca"},
    {.name = "tls-key", .kind = CM_ARG_STRING, .offset = AT(cfg.tls_key), .metavar = "FILE",
     .help = "the private key (PEM) of --tls-cert"},
    {.name = "counter-port", .kind = CM_ARG_INT, .offset = AT(counter_port), .lo = 1, .hi = 65535,
     .metavar = "P",
     .help = "plaintext port of the first node's redis-server for the bench's\n"
             "own connection (bench:counter, contended mode): that connection\n"
             "is plain hiredis without TLS, so with --tls-ca the server must\n"
             "also listen on a plaintext port (--port P2 --tls-port P) and\n"
             "contended mode needs it; the lock traffic stays on TLS\n"
             "(default: the first of --ports)"},
    /* Not listed in the usage text, which is what --help prints. */
    {.name = "help", .short_name = 'h', .kind = CM_ARG_HELP, .offset = AT(help)},
    {.name = "version", .kind = CM_ARG_HELP, .offset = AT(version)},
};

static const cm_args_spec spec = {
    .opts = options,
    .n_opts = sizeof options / sizeof options[0],
    .usage = "usage: dlock-bench --ports P[,P...] [--workers N] [--duration S] [--hold MS]\n"
             "                   [--mode uncontended|contended|raw] [--retry default|tuned|poll] [--ttl MS]\n"
             "                   [--api blocking|async] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]\n"
             "                   [--counter-port P]\n"
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
    cl.cfg.api = BENCH_API_BLOCKING;
    cl.cfg.tls_ca = cl.cfg.tls_cert = cl.cfg.tls_key = NULL;
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
#ifndef BENCH_HAVE_UV
    if (cl.cfg.api == BENCH_API_ASYNC) {
        fprintf(stderr, "dlock-bench: --api async needs libuv, and this dlock-bench was built without "
                        "it (install libuv's development files, pkg-config libuv; Debian libuv1-dev; "
                        "then configure again)\n");
        return -1;
    }
#endif
    /* Raw mode is plain hiredis by design: no event-loop variant, no TLS. */
    if (cl.cfg.mode == BENCH_RAW && cl.cfg.api == BENCH_API_ASYNC) {
        fprintf(stderr, "dlock-bench: --mode raw is blocking hiredis only; --api async is for "
                        "the lock modes\n");
        return -1;
    }
    if ((cl.cfg.tls_cert != NULL) != (cl.cfg.tls_key != NULL)) {
        fprintf(stderr, "dlock-bench: --tls-cert and --tls-key go together\n");
        return -1;
    }
    if (cl.cfg.tls_cert != NULL && cl.cfg.tls_ca == NULL) {
        fprintf(stderr, "dlock-bench: --tls-cert given without --tls-ca: TLS is on with --tls-ca\n");
        return -1;
    }
    if (cl.cfg.tls_ca != NULL && cl.cfg.mode == BENCH_RAW) {
        fprintf(stderr, "dlock-bench: --mode raw is plain hiredis, without TLS; --tls-* are for "
                        "the lock modes\n");
        return -1;
    }
    if (cl.cfg.tls_ca != NULL && cl.cfg.mode == BENCH_CONTENDED && cl.counter_port == 0) {
        fprintf(stderr, "dlock-bench: --mode contended with --tls-ca needs --counter-port P: a "
                        "plaintext port of the first node's redis-server, for bench:counter\n");
        return -1;
    }
    *cfg = cl.cfg;
    cfg->hold_ms = (uint32_t)cl.hold_ms;
    cfg->ttl_ms = (uint32_t)cl.ttl_ms;
    cfg->counter_port = cl.counter_port != 0 ? cl.counter_port : cfg->ports[0];
    return 0;
}

const char *bench_mode_name(bench_mode m)
{
    return (size_t)m < N_MODES ? mode_names[m] : "?";
}

const char *bench_api_name(bench_api a)
{
    return (size_t)a < N_APIS ? api_names[a] : "?";
}

const char *bench_retry_name(const bench_config *cfg)
{
    /* Raw mode never retries: a failed SET NX is counted, not repeated. */
    if (cfg->mode == BENCH_RAW)
        return "none";
    return (size_t)cfg->retry < N_RETRIES ? retry_names[cfg->retry] : "?";
}
