/* bench.h - dlock-bench internals: configuration, worker state and loops.
 * The latency histogram, clock, sleep and option parser are common/'s (common.h). */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common.h"
#include "dlock.h"

#define BENCH_HOST "127.0.0.1"
#define BENCH_MAX_WORKERS 1024
#define BENCH_MAX_DURATION_S 86400.0
#define BENCH_MAX_MS 3600000u
#define BENCH_COUNTER_KEY "bench:counter"
#define BENCH_SHARED_KEY "bench:lock"
#define BENCH_KEY_FMT "bench:lock:%d"
/* Plain hiredis connections (counter, raw mode): bounded like the library's. */
#define BENCH_CONNECT_TIMEOUT_MS 1000
#define BENCH_COMMAND_TIMEOUT_MS 2000
#define BENCH_ERR_LEN 256

typedef enum bench_mode { BENCH_UNCONTENDED, BENCH_CONTENDED, BENCH_RAW } bench_mode;
typedef enum bench_retry { BENCH_RETRY_DEFAULT, BENCH_RETRY_TUNED, BENCH_RETRY_POLL } bench_retry;
/* blocking: one thread per worker, each with its own dlock_client; async:
 * every worker on one libuv loop in one thread, one dlock_async client. */
typedef enum bench_api { BENCH_API_BLOCKING, BENCH_API_ASYNC } bench_api;

typedef struct bench_config {
    int ports[DLOCK_MAX_NODES]; /* distinct, on BENCH_HOST; ports[0]'s server also holds the counter */
    size_t n_ports;             /* 1 = single instance, more = Redlock */
    int workers;                /* 1..BENCH_MAX_WORKERS: threads with one client each (blocking),
                                   or logical workers on one loop and one client (async) */
    double duration_s;          /* run length; a cycle that started before the end is finished */
    uint32_t hold_ms;           /* time spent inside the lock per cycle */
    uint32_t ttl_ms;            /* lock TTL, also the longest wait for one acquisition */
    bench_mode mode;
    bench_retry retry;
    bench_api api;
    /* TLS: with tls_ca set every node is reached as rediss://BENCH_HOST:port,
     * verified against it; tls_cert and tls_key (both or neither) are the
     * client certificate. NULL: plaintext. Borrowed from argv. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    /* The plaintext port of the first node's server that the bench's own
     * hiredis connection (bench:counter) uses: ports[0] without TLS; with
     * TLS a second, plaintext port of the same server (--counter-port),
     * since the system hiredis may have no TLS. */
    int counter_port;
} bench_config;

/* Parses argv into cfg. Returns 0 to run, 1 when --help was printed, -1 on a
 * usage error (message already written to stderr, or --help could not be). */
int bench_parse_args(int argc, char **argv, bench_config *cfg);
const char *bench_mode_name(bench_mode m);
const char *bench_retry_name(const bench_config *cfg);
const char *bench_api_name(bench_api a);

typedef enum bench_state { BENCH_WAIT = 0, BENCH_GO, BENCH_ABORT } bench_state;

/* State every worker shares. The start gate is a mutex + condition rather
 * than a barrier: if creating thread k fails, a barrier sized for every
 * worker would never open and the threads already started would hang. */
typedef struct bench_shared {
    const bench_config *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int ready;          /* workers done with set-up (successfully or not); under mu */
    bench_state state;  /* under mu; main sets GO or ABORT once every worker is ready */
    int64_t start_ns;   /* written under mu before GO, read-only afterwards */
    int64_t end_ns;
    /* Contended mode: workers currently inside the critical section. With a
     * correct lock it is 0 on every entry; anything else is an overlap. */
    atomic_int inside;
    atomic_uint_fast64_t overlaps;
    uint64_t run_id; /* random, makes raw-mode tokens unique across runs */
} bench_shared;

typedef struct bench_worker {
    bench_shared *sh;
    int id;
    pthread_t thread;
    uint64_t successes;
    uint64_t acquire_failures;
    uint64_t release_failures; /* release found the lock lost (hold too near the TTL) or no quorum */
    uint64_t lock_round_trips;
    dlock_stats stats;      /* libdlock counters over the measured loop (lock modes only) */
    int64_t ended_ns;       /* when this worker left its loop */
    cm_hist *acq;           /* successful acquisitions only, in us; owned (freed by main) */
    cm_hist *cycle;         /* acquire + hold + release, successful cycles, in us; owned */
    int failed;             /* nonzero: err says why; the run is reported as broken */
    char err[BENCH_ERR_LEN];
} bench_worker;

/* Thread entry points; arg is a bench_worker. */
void *bench_lock_worker(void *arg);
void *bench_raw_worker(void *arg);

/* The libdlock options of cfg: its nodes (written into addr_buf, pointed
 * to by addrs), the retry policy and TLS. The strings must outlive the
 * dlock_client_new / dlock_async_new call. */
#define BENCH_ADDR_LEN 40
void bench_lock_options(const bench_config *cfg, dlock_options *o, char (*addr_buf)[BENCH_ADDR_LEN],
                        const char **addrs);

#ifdef BENCH_HAVE_UV
/* --api async: runs every worker of workers[0..sh->cfg->workers) on one
 * libuv loop in the calling thread, sets sh->start_ns and end_ns itself,
 * and fills each worker's counters and histograms as the threads do; the
 * client's counters over the measured loop go to *stats (the client is
 * shared, so they are not per worker). 0, or -1 with a message on stderr
 * (set-up failed) or with workers[i].failed set. */
int bench_async_run(bench_shared *sh, bench_worker *workers, dlock_stats *stats);
#endif

/* Shared helpers. */
/* A pthread mutex or condition call on an object that exists fails only on a
 * bug; reported and aborted at once rather than leaving workers waiting
 * forever at a gate nobody opens. */
void bench_pthread_check(int rc, const char *what);
/* Reports set-up done and waits for the start; nonzero when the run may go. */
int bench_wait_start(bench_worker *w);
void bench_fail(bench_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sleeps ms (a hold or a back-off), whole even across signals; -1 with the
 * worker failed (bench_fail) when the sleep itself fails. */
int bench_sleep(bench_worker *w, uint32_t ms);

/* Blocking hiredis connection to BENCH_HOST:port with connect and command
 * timeouts; NULL with the reason in err on failure. */
redisContext *bench_redis_connect(int port, char *err, size_t errlen);
/* Runs one command built from argv; returns the reply (caller frees) or NULL
 * with the reason in err. Error replies are failures too. */
redisReply *bench_redis_cmd(redisContext *c, char *err, size_t errlen, int argc, const char **argv);

#endif /* DLOCK_BENCH_H */
