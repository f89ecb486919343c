/* args.c - dlock-bench command line: parsing, validation and usage text. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dlock-bench --ports P[,P...] [--workers N] [--duration S] [--hold MS]\n"
            "                   [--mode uncontended|contended|raw] [--retry default|tuned] [--ttl MS]\n"
            "\n"
            "  --ports     Redis ports on 127.0.0.1; one = single instance, several = Redlock\n"
            "  --workers   threads, each with its own client and connections (1..%d, default 1)\n"
            "  --duration  seconds to run (> 0, default 5)\n"
            "  --hold      ms spent inside the lock per cycle (default 0)\n"
            "  --mode      uncontended: worker i locks bench:lock:<i>;\n"
            "              contended: all workers fight for bench:lock and increment bench:counter\n"
            "              with a non-atomic GET/SET inside it (counter must equal successes);\n"
            "              raw: plain hiredis SET NX PX + EVALSHA release (the 2-round-trip limit)\n"
            "  --retry     default: library retry defaults; tuned: fixed 3 ms +- 2 ms\n"
            "  --ttl       lock TTL in ms, also the longest wait per acquisition (default 2000)\n"
            "\n"
            "Prints one JSON line. Exit 0: run done, no violation; 1: violations or Redis error;\n"
            "2: usage error.\n",
            BENCH_MAX_WORKERS);
}

/* Whole-string decimal integer in [lo, hi]; rejects "", "12x", "-", overflow. */
static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "dlock-bench: %s: expected an integer in %ld..%ld, got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_ports(const char *s, bench_config *cfg)
{
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        fprintf(stderr, "dlock-bench: --ports: list too long\n");
        return -1;
    }
    memcpy(buf, s, strlen(s) + 1);
    cfg->n_ports = 0;
    /* strsep, not strtok: "6400,,6401" must be an error, not two ports. */
    char *rest = buf;
    char *item;
    while ((item = strsep(&rest, ",")) != NULL) {
        long port;
        if (cfg->n_ports == DLOCK_MAX_NODES) {
            fprintf(stderr, "dlock-bench: --ports: at most %d ports\n", DLOCK_MAX_NODES);
            return -1;
        }
        if (parse_long("--ports", item, 1, 65535, &port) != 0)
            return -1;
        for (size_t i = 0; i < cfg->n_ports; i++) {
            /* The same node twice would count one vote twice: a fake quorum. */
            if (cfg->ports[i] == (int)port) {
                fprintf(stderr, "dlock-bench: --ports: port %ld given twice\n", port);
                return -1;
            }
        }
        cfg->ports[cfg->n_ports++] = (int)port;
    }
    return 0;
}

static int parse_duration(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (s[0] == '\0' || end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || v <= 0.0 ||
        v > BENCH_MAX_DURATION_S) {
        fprintf(stderr, "dlock-bench: --duration: expected seconds in (0, %.0f], got '%s'\n",
                BENCH_MAX_DURATION_S, s);
        return -1;
    }
    *out = v;
    return 0;
}

int bench_parse_args(int argc, char **argv, bench_config *cfg)
{
    enum { O_PORTS = 1, O_WORKERS, O_DURATION, O_HOLD, O_MODE, O_RETRY, O_TTL, O_HELP };
    static const struct option opts[] = {
        {"ports", required_argument, NULL, O_PORTS},
        {"workers", required_argument, NULL, O_WORKERS},
        {"duration", required_argument, NULL, O_DURATION},
        {"hold", required_argument, NULL, O_HOLD},
        {"mode", required_argument, NULL, O_MODE},
        {"retry", required_argument, NULL, O_RETRY},
        {"ttl", required_argument, NULL, O_TTL},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(cfg, 0, sizeof *cfg);
    cfg->workers = 1;
    cfg->duration_s = 5.0;
    cfg->hold_ms = 0;
    cfg->ttl_ms = 2000;
    cfg->mode = BENCH_UNCONTENDED;
    cfg->retry = BENCH_RETRY_DEFAULT;

    opterr = 0;
    int opt;
    long v;
    while ((opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (opt) {
        case O_PORTS:
            if (parse_ports(optarg, cfg) != 0)
                return -1;
            break;
        case O_WORKERS:
            if (parse_long("--workers", optarg, 1, BENCH_MAX_WORKERS, &v) != 0)
                return -1;
            cfg->workers = (int)v;
            break;
        case O_DURATION:
            if (parse_duration(optarg, &cfg->duration_s) != 0)
                return -1;
            break;
        case O_HOLD:
            if (parse_long("--hold", optarg, 0, BENCH_MAX_MS, &v) != 0)
                return -1;
            cfg->hold_ms = (uint32_t)v;
            break;
        case O_TTL:
            if (parse_long("--ttl", optarg, 1, BENCH_MAX_MS, &v) != 0)
                return -1;
            cfg->ttl_ms = (uint32_t)v;
            break;
        case O_MODE:
            if (strcmp(optarg, "uncontended") == 0)
                cfg->mode = BENCH_UNCONTENDED;
            else if (strcmp(optarg, "contended") == 0)
                cfg->mode = BENCH_CONTENDED;
            else if (strcmp(optarg, "raw") == 0)
                cfg->mode = BENCH_RAW;
            else {
                fprintf(stderr, "dlock-bench: --mode: expected uncontended, contended or raw, got '%s'\n",
                        optarg);
                return -1;
            }
            break;
        case O_RETRY:
            if (strcmp(optarg, "default") == 0)
                cfg->retry = BENCH_RETRY_DEFAULT;
            else if (strcmp(optarg, "tuned") == 0)
                cfg->retry = BENCH_RETRY_TUNED;
            else {
                fprintf(stderr, "dlock-bench: --retry: expected default or tuned, got '%s'\n", optarg);
                return -1;
            }
            break;
        case O_HELP:
            usage(stdout);
            return 1;
        case ':':
            fprintf(stderr, "dlock-bench: %s needs a value\n", argv[optind - 1]);
            return -1;
        default:
            fprintf(stderr, "dlock-bench: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dlock-bench: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (cfg->n_ports == 0) {
        fprintf(stderr, "dlock-bench: --ports is required (see --help)\n");
        return -1;
    }
    /* A hold as long as the TTL lets the lock expire while the holder is
     * still inside, so the bench would measure an unsafe configuration. */
    if (cfg->hold_ms >= cfg->ttl_ms) {
        fprintf(stderr, "dlock-bench: --ttl (%u ms) must be larger than --hold (%u ms)\n",
                cfg->ttl_ms, cfg->hold_ms);
        return -1;
    }
    return 0;
}

const char *bench_mode_name(bench_mode m)
{
    switch (m) {
    case BENCH_UNCONTENDED:
        return "uncontended";
    case BENCH_CONTENDED:
        return "contended";
    case BENCH_RAW:
        return "raw";
    }
    return "?";
}

const char *bench_retry_name(const bench_config *cfg)
{
    /* Raw mode never retries: a failed SET NX is counted, not repeated. */
    if (cfg->mode == BENCH_RAW)
        return "none";
    return cfg->retry == BENCH_RETRY_TUNED ? "tuned" : "default";
}
